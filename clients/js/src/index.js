// matchmaker client for browsers and Node 20 (docs/api.md).
//
// One file, no build step: matchd serves this same file to its web console
// as /console/matchmaker.js. Commands go over HTTP (global fetch); match
// events come over one WebSocket per user (the browser's WebSocket, or the
// `ws` package in Node, loaded only there), reconnected with a backoff and
// deduplicated by event id, so the application sees each event once.

const DEFAULT_BACKOFF = Object.freeze({
  initialMs: 250,
  maxMs: 10000,
  factor: 2,
  jitter: 0.2,
});

/** A refusal of matchd: `status` (HTTP), `code` (the `error` name), `detail`. */
export class MatchmakerError extends Error {
  constructor(status, code, detail, body) {
    super(`${status} ${code}${detail ? ': ' + detail : ''}`);
    this.name = 'MatchmakerError';
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.body = body;
  }
}

/** A random ticket id (1-128 bytes of [A-Za-z0-9_.:@-]). */
export function newTicketId() {
  const c = globalThis.crypto;
  if (c && typeof c.randomUUID === 'function') return 't-' + c.randomUUID();
  // Pages served over plain http to another host are not a secure
  // context: no randomUUID there, but getRandomValues works.
  const bytes = new Uint8Array(16);
  c.getRandomValues(bytes);
  return 't-' + Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** The delay before reconnect attempt `attempt` (0-based), in ms. */
export function backoffDelay(attempt, backoff = DEFAULT_BACKOFF, random = Math.random) {
  const b = { ...DEFAULT_BACKOFF, ...backoff };
  const base = Math.min(b.maxMs, b.initialMs * Math.pow(b.factor, attempt));
  const spread = base * b.jitter * (2 * random() - 1);
  return Math.max(0, Math.round(base + spread));
}

let wsModule = null;

async function webSocketClass(explicit) {
  if (explicit) return explicit;
  if (typeof globalThis.WebSocket === 'function') return globalThis.WebSocket;
  // Node 20 has no global WebSocket: the `ws` package (package.json).
  if (!wsModule) wsModule = import('ws');
  const mod = await wsModule;
  return mod.WebSocket || mod.default;
}

function segment(id, what) {
  if (typeof id !== 'string' || !/^[A-Za-z0-9_.:@-]{1,128}$/.test(id))
    throw new TypeError(`${what}: must be 1-128 bytes of [A-Za-z0-9_.:@-]`);
  return id;
}

/**
 * The client of one user. Options: `url` (matchd's base URL, e.g.
 * "http://127.0.0.1:8080"), `user`, and `token` (a bearer token for that
 * user) or `getToken` (an async function asked before every request and
 * connect: rotate tokens there). Optional: `fetch`, `WebSocket` (classes to
 * use instead of the globals / `ws`), `backoff` ({initialMs, maxMs, factor,
 * jitter}), `dedupe` (event ids remembered, default 1024).
 */
export class MatchmakerClient {
  constructor(opts = {}) {
    if (!opts.url) throw new TypeError('url: required');
    this.url = String(opts.url).replace(/\/+$/, '');
    this.user = segment(opts.user, 'user');
    if (!opts.token && !opts.getToken) throw new TypeError('token or getToken: required');
    this._token = opts.token;
    this._getToken = opts.getToken;
    this._fetch = opts.fetch || globalThis.fetch.bind(globalThis);
    this._WebSocket = opts.WebSocket;
    this.backoff = { ...DEFAULT_BACKOFF, ...(opts.backoff || {}) };
    this.dedupe = opts.dedupe || 1024;
  }

  /** Replaces the token (e.g. before it expires). */
  setToken(token) {
    this._token = token;
  }

  async token() {
    if (this._getToken) this._token = await this._getToken();
    return this._token;
  }

  async _request(method, path, body) {
    const headers = { Authorization: `Bearer ${await this.token()}` };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await this._fetch(this.url + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = null;
    }
    if (!res.ok) {
      const code = (parsed && parsed.error) || 'http_error';
      throw new MatchmakerError(res.status, code, parsed && parsed.detail, parsed);
    }
    return parsed;
  }

  _userPath() {
    return `/v1/users/${encodeURIComponent(this.user)}`;
  }

  /**
   * Joins `queue` (claim-or-enqueue). Options: `ticket` (the idempotency
   * key; default a fresh id), `attrs`, `giveUpAfterS`. Answers the ticket
   * view: {user, queue, ticket, state, session_id?, detail?}.
   */
  join(queue, opts = {}) {
    const body = { queue: segment(queue, 'queue'), ticket: segment(opts.ticket || newTicketId(), 'ticket') };
    if (opts.attrs !== undefined) body.attrs = opts.attrs;
    if (opts.giveUpAfterS !== undefined) body.give_up_after_s = opts.giveUpAfterS;
    return this._request('POST', `${this._userPath()}/tickets`, body);
  }

  /** The state of `ticket` (404 not_found for another user's or an old one). */
  ticket(ticket) {
    return this._request('GET', `${this._userPath()}/tickets/${segment(ticket, 'ticket')}`);
  }

  /** Cancels `ticket`; answers `cancelled`, or `matched` when too late. */
  cancel(ticket) {
    return this._request('DELETE', `${this._userPath()}/tickets/${segment(ticket, 'ticket')}`);
  }

  /** A sign of life for a waiting ticket (needed without an open event stream). */
  heartbeat(ticket) {
    return this._request('POST', `${this._userPath()}/tickets/${segment(ticket, 'ticket')}/heartbeat`, {});
  }

  /** Ends the match session `session`; idempotent. */
  endSession(session, reason) {
    const body = reason === undefined ? {} : { reason };
    return this._request('POST', `${this._userPath()}/sessions/${segment(session, 'session')}/end`, body);
  }

  /**
   * Leaves the group session `session`: the user is free at once, the
   * others play on while enough stay (every member gets
   * session.member_left). Answers {session_id, queue, remaining, left_now,
   * state}; idempotent.
   */
  leaveSession(session, reason) {
    const body = reason === undefined ? {} : { reason };
    return this._request('POST', `${this._userPath()}/sessions/${segment(session, 'session')}/leave`, body);
  }

  /**
   * Asks for players for the open seats of the group session `session`
   * (its queue's shape allows backfill, docs/groups.md "Backfill"); every
   * member hears session.members_changed as seats fill. Answers
   * {session_id, queue, state, players, max_players}; state "full": no
   * seat is open, nothing was asked. Idempotent.
   */
  requestBackfill(session) {
    return this._request('POST', `${this._userPath()}/sessions/${segment(session, 'session')}/backfill`, {});
  }

  /**
   * Creates a party led by the user (docs/groups.md). Answers the party:
   * {party, code, leader, members, phase, version, ...}; hand `code` to
   * those who may join.
   */
  createParty() {
    return this._request('POST', `${this._userPath()}/parties`, {});
  }

  /** Joins `party` with its invite `code`. */
  joinParty(party, code) {
    return this._request('POST', `${this._userPath()}/parties/${segment(party, 'party')}/members`, { code });
  }

  /** The party as a member sees it. */
  party(party) {
    return this._request('GET', `${this._userPath()}/parties/${segment(party, 'party')}`);
  }

  /**
   * The leader queues the party on `queue` (a queue with a shape).
   * Options: `ticket` (default a fresh id), `attrs` (each member's
   * attribute object, by user), `giveUpAfterS`.
   */
  queueParty(party, queue, opts = {}) {
    const body = { queue: segment(queue, 'queue'), ticket: segment(opts.ticket || newTicketId(), 'ticket') };
    if (opts.attrs !== undefined) body.attrs = opts.attrs;
    if (opts.giveUpAfterS !== undefined) body.give_up_after_s = opts.giveUpAfterS;
    return this._request('POST', `${this._userPath()}/parties/${segment(party, 'party')}/tickets`, body);
  }

  /** Cancels the party's ticket; answers once certain (open, or matched). */
  cancelParty(party) {
    return this._request('POST', `${this._userPath()}/parties/${segment(party, 'party')}/cancel`, {});
  }

  /** Leaves the party (a queued ticket is cancelled first). */
  leaveParty(party) {
    return this._request('POST', `${this._userPath()}/parties/${segment(party, 'party')}/leave`, {});
  }

  /**
   * Accepts proposal `proposal` of `queue` (a match.proposed event names
   * both: the ready check, docs/groups.md). Idempotent: the first answer
   * stands. Answers {proposal, queue, answer, deadline_ms, players,
   * accepted, declined, complete}.
   */
  acceptProposal(proposal, queue) {
    return this._answer(proposal, queue, 'accept');
  }

  /** Declines proposal `proposal` of `queue` (as acceptProposal). */
  declineProposal(proposal, queue) {
    return this._answer(proposal, queue, 'decline');
  }

  _answer(proposal, queue, what) {
    const path = `${this._userPath()}/proposals/${segment(proposal, 'proposal')}/${what}`;
    return this._request('POST', path, { queue: segment(queue, 'queue') });
  }

  /** Swipes `to` with `action` "LIKE" or "DISLIKE". */
  swipe(to, action = 'LIKE') {
    return this._request('POST', `${this._userPath()}/swipes`, { to: segment(to, 'to'), action });
  }

  /**
   * Opens the user's event stream (a WebSocket that reconnects by itself).
   * `handlers`: {onEvent(ev), onOpen(), onClose({code, reason, willRetry}),
   * onError(err)}; more with `stream.on(name, fn)`.
   */
  events(handlers = {}) {
    const stream = new EventStream(this, handlers);
    stream._connect();
    return stream;
  }
}

/** The reconnecting, deduplicating event stream of one user. */
export class EventStream {
  constructor(client, handlers = {}) {
    this.client = client;
    this._listeners = { event: [], open: [], close: [], error: [], reply: [] };
    if (handlers.onEvent) this.on('event', handlers.onEvent);
    if (handlers.onOpen) this.on('open', handlers.onOpen);
    if (handlers.onClose) this.on('close', handlers.onClose);
    if (handlers.onError) this.on('error', handlers.onError);
    this._seen = new Set();
    this._order = [];
    this._closed = false;
    this._attempt = 0;
    this._timer = null;
    this._ws = null;
    this._waiters = [];
    this._buffer = []; // delivered events, for next(); at most 256
    /** Connections opened so far (1 after the first, +1 per reconnect). */
    this.opens = 0;
    /** Duplicates dropped (the server delivers at least once). */
    this.duplicates = 0;
  }

  /** Adds a listener: "event", "open", "close" or "error". */
  on(name, fn) {
    if (!this._listeners[name]) throw new TypeError(`unknown stream event ${name}`);
    this._listeners[name].push(fn);
    return this;
  }

  /** Removes a listener added with `on`. */
  off(name, fn) {
    const list = this._listeners[name] || [];
    const i = list.indexOf(fn);
    if (i >= 0) list.splice(i, 1);
    return this;
  }

  _emit(name, arg) {
    for (const fn of this._listeners[name]) {
      try {
        fn(arg);
      } catch (err) {
        // An application handler that throws must not stop the stream.
        if (name !== 'error') this._emit('error', err);
      }
    }
  }

  /** True while the WebSocket is open. */
  get connected() {
    return this._ws !== null && this._ws.readyState === 1;
  }

  async _connect() {
    if (this._closed) return;
    let ws;
    try {
      const WS = await webSocketClass(this.client._WebSocket);
      const token = await this.client.token();
      const base = this.client.url.replace(/^http/, 'ws') + this.client._userPath() + '/events';
      if (typeof process !== 'undefined' && process.versions && process.versions.node && WS !== globalThis.WebSocket) {
        ws = new WS(base, { headers: { Authorization: `Bearer ${token}` } });
      } else {
        // A browser cannot set headers on the handshake.
        ws = new WS(`${base}?access_token=${encodeURIComponent(token)}`);
      }
    } catch (err) {
      this._emit('error', err);
      this._retry(0, String(err && err.message));
      return;
    }
    if (this._closed) {
      ws.close();
      return;
    }
    this._ws = ws;
    ws.onopen = () => {
      this._attempt = 0;
      this.opens += 1;
      this._emit('open');
    };
    ws.onmessage = (msg) => this._message(msg.data);
    ws.onerror = (e) => this._emit('error', e && e.error ? e.error : new Error('websocket error'));
    ws.onclose = (e) => {
      if (this._ws === ws) this._ws = null;
      this._retry(e ? e.code : 0, e ? e.reason : '');
    };
  }

  _retry(code, reason) {
    const willRetry = !this._closed;
    this._emit('close', { code, reason, willRetry });
    if (!willRetry) return;
    const delay = backoffDelay(this._attempt, this.client.backoff);
    this._attempt += 1;
    this._timer = setTimeout(() => {
      this._timer = null;
      this._connect();
    }, delay);
  }

  _message(data) {
    let ev;
    try {
      ev = JSON.parse(typeof data === 'string' ? data : String(data));
    } catch (err) {
      this._emit('error', err);
      return;
    }
    // Replies to requests sent on the socket (docs/api.md "Requests on the
    // WebSocket") are no events.
    if (ev && ev.type === 'reply') {
      this._emit('reply', ev);
      return;
    }
    if (ev && typeof ev.event_id === 'string' && ev.event_id) {
      if (this._seen.has(ev.event_id)) {
        this.duplicates += 1;
        return;
      }
      this._seen.add(ev.event_id);
      this._order.push(ev.event_id);
      if (this._order.length > this.client.dedupe) this._seen.delete(this._order.shift());
    }
    this._buffer.push(ev);
    if (this._buffer.length > 256) this._buffer.shift();
    for (const w of this._waiters.slice()) {
      if (w.match(ev)) {
        this._waiters.splice(this._waiters.indexOf(w), 1);
        this._buffer.splice(this._buffer.indexOf(ev), 1);
        clearTimeout(w.timer);
        w.resolve(ev);
        break;
      }
    }
    this._emit('event', ev);
  }

  /**
   * The next event for which `match(ev)` is true (default: any), also one
   * that arrived before the call and was not taken yet; rejects after
   * `timeoutMs` (default 10000).
   */
  next(match = () => true, { timeoutMs = 10000 } = {}) {
    const i = this._buffer.findIndex(match);
    if (i >= 0) return Promise.resolve(this._buffer.splice(i, 1)[0]);
    return new Promise((resolve, reject) => {
      const w = { match, resolve };
      w.timer = setTimeout(() => {
        this._waiters.splice(this._waiters.indexOf(w), 1);
        reject(new Error(`no matching event within ${timeoutMs} ms`));
      }, timeoutMs);
      this._waiters.push(w);
    });
  }

  /** Resolves once the WebSocket is open (at once if it is). */
  opened({ timeoutMs = 10000 } = {}) {
    if (this.connected) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onOpen = () => {
        clearTimeout(timer);
        this.off('open', onOpen);
        resolve();
      };
      const timer = setTimeout(() => {
        this.off('open', onOpen);
        reject(new Error(`not open within ${timeoutMs} ms`));
      }, timeoutMs);
      this.on('open', onOpen);
    });
  }

  /** Closes the stream for good (no reconnect). Idempotent. */
  close() {
    this._closed = true;
    if (this._timer) clearTimeout(this._timer);
    this._timer = null;
    if (this._ws) this._ws.close(1000, 'client closed');
    for (const w of this._waiters) clearTimeout(w.timer);
    this._waiters = [];
  }
}
