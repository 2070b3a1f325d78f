// A receiver that answers 204 at once and keeps nothing: what payorch's own side of a delivery
// costs, without a merchant's database work on the same machine (side_by_side.sh).
//   node null_receiver.js PORT
const http = require("http");
let received = 0;
http
  .createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      received += 1;
      res.writeHead(204);
      res.end();
    });
  })
  .listen(Number(process.argv[2] || 8092), "127.0.0.1");
process.on("SIGINT", () => {
  console.log(`received ${received}`);
  process.exit(0);
});
