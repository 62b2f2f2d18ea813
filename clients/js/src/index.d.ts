// Type declarations of the matchmaker client (src/index.js), written by hand.

/** A ticket as matchd shows it (docs/api.md, "Join a queue"). */
export interface TicketView {
  user: string;
  queue: string;
  ticket: string;
  state: 'claiming' | 'queued' | 'finalizing' | 'matched' | 'cancelled' | 'failed' | 'timed_out';
  session_id?: string;
  detail?: string;
}

export interface EndView {
  session_id: string;
  state: 'ended';
  queue: string;
  ended_by: string;
  reason: string;
  ended_now: boolean;
}

export interface SwipeView {
  mutual: boolean;
  created: boolean;
  session_id?: string;
}

export interface MatchCreatedEvent {
  type: 'match.created';
  event_id: string;
  session_id: string;
  queue: string;
  users: [string, string];
  tickets: [string, string];
}

export interface SessionEndedEvent {
  type: 'session.ended';
  event_id: string;
  session_id: string;
  queue: string;
  users: [string, string];
  tickets: [string, string];
  /** Empty when the session expired. */
  ended_by: string;
  reason: string;
}

export interface StateEvent {
  type: 'state';
  ticket: string;
  state: 'cancelled' | 'failed' | 'timed_out';
  detail?: string;
}

export type MatchmakerEvent = MatchCreatedEvent | SessionEndedEvent | StateEvent;

export interface Backoff {
  /** First reconnect delay in ms (default 250). */
  initialMs?: number;
  /** Largest delay in ms (default 10000). */
  maxMs?: number;
  /** Growth per attempt (default 2). */
  factor?: number;
  /** Spread, a fraction of the delay, +- (default 0.2). */
  jitter?: number;
}

export interface ClientOptions {
  /** matchd's base URL, e.g. "http://127.0.0.1:8080". */
  url: string;
  user: string;
  /** A bearer token for `user`; or give `getToken`. */
  token?: string;
  /** Asked before every request and every (re)connect. */
  getToken?: () => string | Promise<string>;
  fetch?: typeof globalThis.fetch;
  /** A WebSocket class (default: the global one, else the `ws` package). */
  WebSocket?: unknown;
  backoff?: Backoff;
  /** Event ids remembered for deduplication (default 1024). */
  dedupe?: number;
}

export interface JoinOptions {
  /** The idempotency key of the join (default: a fresh id). */
  ticket?: string;
  /** Opaque, at most 4096 bytes (the queue's rules read it). */
  attrs?: string;
  /** 1-86400: give up waiting after this many seconds (`timed_out`). */
  giveUpAfterS?: number;
}

export interface CloseInfo {
  code: number;
  reason: string;
  /** False once `close()` was called. */
  willRetry: boolean;
}

export interface StreamHandlers {
  onEvent?: (ev: MatchmakerEvent) => void;
  onOpen?: () => void;
  onClose?: (info: CloseInfo) => void;
  onError?: (err: unknown) => void;
}

export class MatchmakerError extends Error {
  status: number;
  /** The `error` name of the refusal, e.g. "in_session". */
  code: string;
  detail?: string;
  /** The whole JSON body (e.g. `session_id` of an `in_session` refusal). */
  body: Record<string, unknown> | null;
}

export class EventStream {
  readonly client: MatchmakerClient;
  /** Connections opened so far. */
  readonly opens: number;
  /** Duplicates dropped by event id. */
  readonly duplicates: number;
  readonly connected: boolean;
  on(name: 'event', fn: (ev: MatchmakerEvent) => void): this;
  on(name: 'open', fn: () => void): this;
  on(name: 'close', fn: (info: CloseInfo) => void): this;
  on(name: 'error', fn: (err: unknown) => void): this;
  /** A reply frame to a request sent on the socket (docs/api.md "Requests on the WebSocket"). */
  on(name: 'reply', fn: (reply: { type: 'reply'; id: string | number | null; status: number; body: unknown }) => void): this;
  off(name: 'event' | 'open' | 'close' | 'error' | 'reply', fn: (...args: any[]) => void): this;
  next<T extends MatchmakerEvent = MatchmakerEvent>(
    match?: (ev: MatchmakerEvent) => boolean,
    opts?: { timeoutMs?: number },
  ): Promise<T>;
  opened(opts?: { timeoutMs?: number }): Promise<void>;
  close(): void;
}

export class MatchmakerClient {
  constructor(opts: ClientOptions);
  readonly url: string;
  readonly user: string;
  backoff: Required<Backoff>;
  setToken(token: string): void;
  token(): Promise<string>;
  join(queue: string, opts?: JoinOptions): Promise<TicketView>;
  ticket(ticket: string): Promise<TicketView>;
  cancel(ticket: string): Promise<TicketView>;
  heartbeat(ticket: string): Promise<TicketView>;
  endSession(session: string, reason?: string): Promise<EndView>;
  swipe(to: string, action?: 'LIKE' | 'DISLIKE'): Promise<SwipeView>;
  leaveSession(session: string, reason?: string): Promise<LeaveView>;
  requestBackfill(session: string): Promise<BackfillView>;
  createParty(): Promise<PartyView>;
  joinParty(party: string, code: string): Promise<PartyView>;
  party(party: string): Promise<PartyView>;
  queueParty(party: string, queue: string, opts?: PartyTicketOptions): Promise<PartyView>;
  cancelParty(party: string): Promise<PartyView>;
  leaveParty(party: string): Promise<PartyView>;
  acceptProposal(proposal: string, queue: string): Promise<ProposalView>;
  declineProposal(proposal: string, queue: string): Promise<ProposalView>;
  events(handlers?: StreamHandlers): EventStream;
}

/** A proposal as a member sees it (docs/api.md, "Proposals"). */
export interface ProposalView {
  proposal: string;
  queue: string;
  answer: 'accept' | 'decline' | '';
  deadline_ms: number;
  players: number;
  accepted: number;
  declined: boolean;
  complete: boolean;
}

/** A party as its members see it (docs/api.md, "Parties"). */
export interface PartyView {
  party: string;
  code: string;
  leader: string;
  members: string[];
  phase: 'open' | 'claiming' | 'queued' | 'finalizing' | 'matched';
  queue?: string;
  ticket?: string;
  session_id?: string;
  detail?: string;
  version: number;
}

export interface PartyTicketOptions {
  ticket?: string;
  /** Each member's attribute object, by user. */
  attrs?: Record<string, Record<string, unknown>>;
  giveUpAfterS?: number;
}

export interface LeaveView {
  session_id: string;
  queue: string;
  remaining: number;
  left_now: boolean;
  state: 'active' | 'ended';
}

export interface BackfillView {
  session_id: string;
  queue: string;
  state: 'waiting' | 'full';
  players: number;
  max_players: number;
}

export function newTicketId(): string;
export function backoffDelay(attempt: number, backoff?: Backoff, random?: () => number): number;
