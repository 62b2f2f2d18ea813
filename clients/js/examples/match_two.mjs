// Two users join a queue, are matched with each other, and one ends the
// session. Run against a matchd (docs/matchd.md), with tokens your backend
// signs (here: `matchctl token`):
//
//   export MATCHD_URL=http://127.0.0.1:8080
//   ALICE_TOKEN=$(matchctl token alice) BOB_TOKEN=$(matchctl token bob) \
//     node examples/match_two.mjs
import { MatchmakerClient } from '@matchmaker/client';

const url = process.env.MATCHD_URL || 'http://127.0.0.1:8080';
const queue = process.env.QUEUE || 'default';
const alice = new MatchmakerClient({ url, user: process.env.ALICE_USER || 'alice', token: process.env.ALICE_TOKEN });
const bob = new MatchmakerClient({ url, user: process.env.BOB_USER || 'bob', token: process.env.BOB_TOKEN });

// Open the event streams first: the match arrives there.
const sa = alice.events();
const sb = bob.events();
await Promise.all([sa.opened(), sb.opened()]);

console.log('alice joins:', (await alice.join(queue)).state);
console.log('bob joins:', (await bob.join(queue)).state);

const match = await sa.next((ev) => ev.type === 'match.created');
console.log(`matched: ${match.users.join(' + ')} in session ${match.session_id}`);
await sb.next((ev) => ev.type === 'match.created');

const end = await bob.endSession(match.session_id, 'bye');
console.log('bob ends the session:', end.state);
const ended = await sa.next((ev) => ev.type === 'session.ended');
console.log(`alice hears: session.ended by ${ended.ended_by} (${ended.reason})`);

sa.close();
sb.close();
