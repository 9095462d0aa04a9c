-- the same request without a key (idempotency off)
function request()
  wrk.headers["Content-Type"] = "application/json"
  return wrk.format("POST", nil, nil, '{"amount":1}')
end
