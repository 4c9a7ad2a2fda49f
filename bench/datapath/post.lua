-- wrk script of the data-path benchmark (bench/datapath/run.sh): POST ENTITY_PATH{id} (default
-- /v1/entities/bench/) with a 1 KiB body, the id drawn uniformly from ENTITY_IDS ids (default
-- 10000), so that messages spread over many entities and shards as real traffic does. Each wrk
-- thread draws from its own seeded sequence.
-- BODY=counter-get sends the counter examples' {"op":"get"}, padded with an extra field to the
-- same 1 KiB, instead of 1 KiB of "x".
local ids = tonumber(os.getenv("ENTITY_IDS") or "10000")
local path = os.getenv("ENTITY_PATH") or "/v1/entities/bench/"
local body = string.rep("x", 1024)
local content_type = "application/octet-stream"
if os.getenv("BODY") == "counter-get" then
  local head, tail = '{"op":"get","pad":"', '"}'
  body = head .. string.rep("x", 1024 - #head - #tail) .. tail
  content_type = "application/json"
end
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("seed", counter)
end

function init(args)
  math.randomseed(seed or 1)
end

function request()
  return wrk.format("POST", path .. "e" .. math.random(ids),
                    {["Content-Type"] = content_type}, body)
end
