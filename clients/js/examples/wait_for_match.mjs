// One user: opens its event stream (it reconnects by itself), joins a
// queue, prints every event, and ends the session after HOLD_MS; Ctrl-C
// cancels a join that is still waiting.
//
//   MATCHD_USER=carol MATCHD_TOKEN=$(matchctl token carol) node examples/wait_for_match.mjs
import { MatchmakerClient } from '@matchmaker/client';

const client = new MatchmakerClient({
  url: process.env.MATCHD_URL || 'http://127.0.0.1:8080',
  user: process.env.MATCHD_USER,
  token: process.env.MATCHD_TOKEN,
});
const holdMs = Number(process.env.HOLD_MS || 5000);
let ticket = null;
let matched = false;

const stream = client.events({
  onOpen: () => console.log('event stream open'),
  onClose: ({ code, willRetry }) => console.log(`event stream closed (${code})${willRetry ? ', reconnecting' : ''}`),
  onEvent: async (ev) => {
    console.log('event:', JSON.stringify(ev));
    if (ev.type === 'match.created') {
      matched = true;
      setTimeout(() => client.endSession(ev.session_id, 'done').catch(console.error), holdMs);
    } else if (ev.type === 'session.ended' || ev.type === 'state') {
      stream.close();
    }
  },
});

process.on('SIGINT', async () => {
  if (ticket && !matched) console.log('cancel:', (await client.cancel(ticket)).state);
  stream.close();
});

await stream.opened();
const t = await client.join(process.env.QUEUE || 'default');
ticket = t.ticket;
console.log(`joined ${t.queue} as ticket ${t.ticket}: ${t.state}`);
