// A minimal receiver for hookrelay webhooks, verified with the stock
// `standardwebhooks` package (npm install). Usage:
//
//   WEBHOOK_SECRET=whsec_… PORT=9100 node server.js
//
// It verifies the raw body (never re-encoded JSON), answers 204 only after
// the event is handled, 401 (with no detail) when the signature does not
// verify, and prints one line per request: "verified <event id>" or
// "rejected <reason>".
const http = require("http");
const { Webhook } = require("standardwebhooks");

const secret = process.env.WEBHOOK_SECRET;
if (!secret) {
  console.error("set WEBHOOK_SECRET to the endpoint's whsec_ secret");
  process.exit(2);
}
const wh = new Webhook(secret.replace(/^whsec_/, ""));
const seen = new Set(); // dedupe by event ID (a real receiver keeps this in its database)

const server = http.createServer((req, res) => {
  if (req.method !== "POST") {
    res.writeHead(405).end();
    return;
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    let event;
    try {
      event = wh.verify(body, {
        "webhook-id": req.headers["webhook-id"],
        "webhook-timestamp": req.headers["webhook-timestamp"],
        "webhook-signature": req.headers["webhook-signature"],
      });
    } catch (err) {
      console.log("rejected " + err.message);
      res.writeHead(401).end();
      return;
    }
    if (!seen.has(event.id)) {
      seen.add(event.id);
      // Handle the event here, durably, before answering 2xx.
    }
    console.log("verified " + event.id);
    res.writeHead(204).end();
  });
});

const port = Number(process.env.PORT || 9100);
server.listen(port, "127.0.0.1", () => console.log("listening " + port));
