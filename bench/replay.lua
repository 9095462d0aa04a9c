-- 100 keys, each sent again and again: after the first round, replays.
-- The keys are r0 to r99, or PREFIX0 to PREFIX99 with `wrk ... URL --
-- PREFIX`: each route needs its own, since a key already used on another
-- route is a conflict (the route is in the fingerprint).
local counter = 0
local prefix = "r"
function init(args)
  if args[1] ~= nil then
    prefix = args[1]
  end
end
function request()
  counter = counter + 1
  wrk.headers["Idempotency-Key"] = prefix .. (counter % 100)
  wrk.headers["Content-Type"] = "application/json"
  return wrk.format("POST", nil, nil, '{"amount":1}')
end
