// The official WeCom AI-bot client (@wecom/aibot-node-sdk) fetching the files the mock's
// callbacks link to, with its own `downloadFile(url, aeskey)` (download, then AES-256-CBC
// decrypt): one line per file on stdout, `GOT <msgid> <sha256> <filename|->` or
// `FAILED <msgid> <error>`, then `DONE` after `want` files.
const crypto = require('crypto');
const { WSClient } = require('@wecom/aibot-node-sdk');

const [url, botId, secret, want] = process.argv.slice(2);
const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const say = (line) => console.log(line);
const client = new WSClient({ botId, secret, wsUrl: url, logger: quiet, maxReconnectAttempts: 0 });
let seen = 0;

async function fetch(msgid, block) {
  try {
    const { buffer, filename } = await client.downloadFile(block.url, block.aeskey);
    const sha = crypto.createHash('sha256').update(buffer).digest('hex');
    say(`GOT ${msgid} ${sha} ${filename || '-'}`);
  } catch (e) {
    say(`FAILED ${msgid} ${e.message}`);
  }
  seen += 1;
  if (seen >= Number(want)) {
    say('DONE');
    setTimeout(() => process.exit(0), 100);
  }
}

client.on('authenticated', () => say('AUTHENTICATED'));
client.on('message.image', (frame) => fetch(frame.body.msgid, frame.body.image));
client.on('message.file', (frame) => fetch(frame.body.msgid, frame.body.file));
client.on('message.video', (frame) => fetch(frame.body.msgid, frame.body.video));
client.on('message.mixed', (frame) => {
  const item = frame.body.mixed.msg_item.find((i) => i.msgtype === 'image');
  fetch(frame.body.msgid, item.image);
});
client.connect();
setTimeout(() => { say('TIMEOUT'); process.exit(1); }, 30000);
