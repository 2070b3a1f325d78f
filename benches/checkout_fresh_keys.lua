-- wrk: `POST /v1/checkout` under a fresh Idempotency-Key per request,
-- `<thread>-<12 hex>-<counter>`, as the merchant whose API key is in CHECKOUT_API_KEY.
-- ab_checkout.sh runs it as it is; soak_checkout.sh appends its own ending.
local counter, threads = 0, 0
local body = '{"amount":100,"currency":"usd","payment_method":"pm_card_visa"}'
local auth = os.getenv("CHECKOUT_API_KEY")
function setup(thread) threads = threads + 1; thread:set("n", threads) end
function init(args)
  local f = io.open("/dev/urandom", "rb"); local r = f:read(6); f:close()
  prefix = string.format("%d-%s-", n, (r:gsub(".", function(c) return string.format("%02x", c:byte()) end)))
end
request = function()
  counter = counter + 1
  return wrk.format("POST", "/v1/checkout", {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. auth,
    ["Idempotency-Key"] = prefix .. counter,
  }, body)
end
