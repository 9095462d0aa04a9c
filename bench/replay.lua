-- 100 keys, each sent again and again: after the first round, replays
local counter = 0
function request()
  counter = counter + 1
  wrk.headers["Idempotency-Key"] = "r" .. (counter % 100)
  wrk.headers["Content-Type"] = "application/json"
  return wrk.format("POST", nil, nil, '{"amount":1}')
end
