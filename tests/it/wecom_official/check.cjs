// The official WeCom AI-bot client (@wecom/aibot-node-sdk) against the mock: subscribe, a
// callback in, a stream reply and a proactive message out, pings answered, and a second
// client's subscription kicking the first. Prints one line per step on stdout.
const { WSClient } = require('@wecom/aibot-node-sdk');

const [url, botId, secret] = process.argv.slice(2);
const quiet = { debug() {}, info() {}, warn() {}, error: (...a) => console.error(...a) };
const say = (line) => console.log(line);
const options = { botId, secret, wsUrl: url, heartbeatInterval: 500, logger: quiet, maxReconnectAttempts: 0 };

const first = new WSClient(options);
first.on('authenticated', () => say('AUTHENTICATED'));
first.on('message.text', async (frame) => {
  say(`MESSAGE ${frame.body.msgid} ${frame.body.text.content}`);
  await first.replyStream(frame, 'official-stream-1', `echo: ${frame.body.text.content}`, true);
  say('REPLIED');
  await first.sendMessage(frame.body.from.userid, { msgtype: 'markdown', markdown: { content: 'proactive' } });
  say('SENT');
  // Long enough for a few pings to be answered.
  setTimeout(() => {
    say('PINGED');
    const second = new WSClient(options);
    second.on('authenticated', () => say('SECOND AUTHENTICATED'));
    second.connect();
  }, 1500);
});
first.on('event.disconnected_event', () => say('KICKED'));
first.on('disconnected', () => {
  say('DISCONNECTED');
  setTimeout(() => process.exit(0), 200);
});
first.connect();
setTimeout(() => { say('TIMEOUT'); process.exit(1); }, 30000);
