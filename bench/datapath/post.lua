-- wrk script of the data-path benchmark (bench/datapath/run.sh): POST /v1/entities/bench/{id}
-- with a 1 KiB body, the id drawn uniformly from ENTITY_IDS ids (default 10000), so that
-- messages spread over many entities and shards as real traffic does. Each wrk thread draws
-- from its own seeded sequence.
local ids = tonumber(os.getenv("ENTITY_IDS") or "10000")
local body = string.rep("x", 1024)
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("seed", counter)
end

function init(args)
  math.randomseed(seed or 1)
end

function request()
  return wrk.format("POST", "/v1/entities/bench/e" .. math.random(ids),
                    {["Content-Type"] = "application/octet-stream"}, body)
end
