-- every request its own Idempotency-Key
local counter = 0
local thread_id = 0
function setup(thread)
  thread:set("id", thread_id)
  thread_id = thread_id + 1
end
function init(args)
  math.randomseed(os.time() + id)
  prefix = string.format("u%d-%d-%d-", id, os.time(), math.random(1, 1000000000))
end
function request()
  counter = counter + 1
  wrk.headers["Idempotency-Key"] = prefix .. counter
  wrk.headers["Content-Type"] = "application/json"
  return wrk.format("POST", nil, nil, '{"amount":1}')
end
