-- wrk: `POST $WRK_PATH` with body $WRK_BODY under a fresh Idempotency-Key per request,
-- `<thread>-<12 hex>-<counter>`, as the merchant whose API key is $WRK_AUTH (pooler.sh).
local counter, threads = 0, 0
local path = os.getenv("WRK_PATH")
local body = os.getenv("WRK_BODY")
local auth = os.getenv("WRK_AUTH")
function setup(thread) threads = threads + 1; thread:set("n", threads) end
function init(args)
  local f = io.open("/dev/urandom", "rb"); local r = f:read(6); f:close()
  prefix = string.format("%d-%s-", n, (r:gsub(".", function(c) return string.format("%02x", c:byte()) end)))
end
request = function()
  counter = counter + 1
  local headers = { ["Content-Type"] = "application/json", ["Idempotency-Key"] = prefix .. counter,
                    ["Authorization"] = "Bearer " .. auth }
  return wrk.format("POST", path, headers, body)
end
