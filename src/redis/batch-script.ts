/**
 * The one script every per-turn batch runs (redis/batch.ts): BATCH_LUA, its operations and how a list of operations
 * becomes the call's KEYS and ARGV.
 */

/** L: limiter, A: counters add, M: MGET, G: GET, S: SET … EX, X: XADD … * (see BATCH_LUA). */
export type BatchOp = 'L' | 'A' | 'M' | 'G' | 'S' | 'X';

export const BATCH_LUA = `
local SCALE = 60000

-- Each operation gets its keys as a list (ks), picked out of KEYS by the indices in its header.

-- L: the rate limiter (redis/limit-store.ts; MemoryLimitStore.apply is the same arithmetic).
-- keys: cfg, then one per bucket. ARGV: ONE string, comma-separated: now, mode, rpm, tpm, burst, version, then per
-- bucket: kind, cost (one argument instead of 6 + 2 per bucket: each argument is encoded, sent and parsed apart).
-- kind: r (requests) or t (tokens) under the scope's limits, or R<rate>v<version> / T<rate>v<version>: a window of
-- its own (an end customer's), capacity and refill <rate> a minute, fresh when last written under another version.
-- Returns one string, comma-separated: allowed, rpm, tpm, burst, version, then per bucket: used, applied.
local function limit(ks, a)
  local p = {}
  for x in string.gmatch(ARGV[a], '[^,]+') do p[#p + 1] = x end
  local now = tonumber(p[1])
  local force = p[2] == 'force'
  local rpm, tpm, burst, ver = tonumber(p[3]), tonumber(p[4]), tonumber(p[5]), tonumber(p[6])
  local cfg = redis.call('HMGET', ks[1], 'rpm', 'tpm', 'burst', 'v')
  local published = tonumber(cfg[4])
  if published and published >= ver then
    rpm, tpm, burst, ver = tonumber(cfg[1]), tonumber(cfg[2]), tonumber(cfg[3]), published
  elseif ver > 0 then
    redis.call('HSET', ks[1], 'rpm', p[3], 'tpm', p[4], 'burst', p[5], 'v', p[6])
  end
  local n = #ks - 1
  local used, cost, cap, rate, last, bver = {}, {}, {}, {}, {}, {}
  local allowed = 1
  for i = 1, n do
    local kind = p[5 + 2 * i]
    local c = tonumber(p[6 + 2 * i])
    bver[i] = ver
    if kind == 'r' then cap[i] = (rpm + burst) * SCALE; rate[i] = rpm
    elseif kind == 't' then cap[i] = tpm * SCALE; rate[i] = tpm
    else
      local _, orate, over = string.match(kind, '^(%a)(%d+)v(%d+)$')
      rate[i] = tonumber(orate); cap[i] = rate[i] * SCALE; bver[i] = tonumber(over)
    end
    local s = redis.call('HMGET', ks[1 + i], 'u', 't', 'v')
    local u, t = 0, now
    if s[1] and tonumber(s[3]) == bver[i] then
      u, t = tonumber(s[1]), tonumber(s[2])
      if now > t then
        u = math.max(0, u - (now - t) * rate[i])
        t = now
      end
    end
    if not force then
      if c > cap[i] / SCALE then c = cap[i] / SCALE end
      if c > 0 and u + c * SCALE > cap[i] then allowed = 0 end
    end
    used[i], cost[i], last[i] = u, c, t
  end
  local out = { tostring(allowed), p[3], p[4], p[5], p[6] }
  if published and published >= ver then
    out[2], out[3], out[4], out[5] = cfg[1], cfg[2], cfg[3], cfg[4]
  end
  for i = 1, n do
    local u = used[i]
    if allowed == 1 and cost[i] ~= 0 then
      u = math.max(0, u + cost[i] * SCALE)
      if u == 0 then
        redis.call('DEL', ks[1 + i])
      else
        redis.call('HSET', ks[1 + i], 'u', string.format('%.0f', u), 't', string.format('%.0f', last[i]), 'v', string.format('%.0f', bver[i]))
        redis.call('PEXPIRE', ks[1 + i], math.ceil(u / rate[i]) + 60000)
      end
    end
    out[4 + 2 * i] = string.format('%.0f', u)
    out[5 + 2 * i] = string.format('%.0f', cost[i])
  end
  return table.concat(out, ',')
end

-- A: INCRBY ARGV[a] on each counter that exists (budget counters; missing ones stay missing).
local function add(ks, a)
  for i = 1, #ks do
    if redis.call('EXISTS', ks[i]) == 1 then redis.call('INCRBY', ks[i], ARGV[a]) end
  end
  return 0
end

local OPS = {
  L = limit,
  A = add,
  M = function(ks) return redis.call('MGET', unpack(ks)) end,
  G = function(ks) return redis.call('GET', ks[1]) end,
  S = function(ks, a) return redis.call('SET', ks[1], ARGV[a], 'EX', ARGV[a + 1]) end,
  X = function(ks, a, na) return redis.call('XADD', ks[1], '*', unpack(ARGV, a, a + na - 1)) end,
}

-- ARGV: per operation one header "<code><argument count>" then ",<index in KEYS>" per key (e.g. "L1,1,2,3,4,5"), then
-- its arguments; KEYS: every key of the call once, in order of first use (the requests of a turn share a project's
-- windows: each key is sent and parsed once per call, not once per operation). Returns per operation: 1 and the
-- result, or 0 and the error message.
local out = {}
local a = 1
local op = 0
while a <= #ARGV do
  local code, na, rest = string.match(ARGV[a], '^(%a)(%d+)(.*)$')
  na = tonumber(na)
  local ks = {}
  for i in string.gmatch(rest, '%d+') do ks[#ks + 1] = KEYS[tonumber(i)] end
  a = a + 1
  local ok, res = pcall(OPS[code], ks, a, na)
  op = op + 1
  if ok then
    out[2 * op - 1] = 1
    out[2 * op] = res or false
  else
    out[2 * op - 1] = 0
    out[2 * op] = type(res) == 'table' and (res.err or 'error') or tostring(res)
  end
  a = a + na
end
return out
`;

/**
 * The script call's KEYS and ARGV for `ops` (BATCH_LUA's format): each distinct key once, in order of first use, and
 * per operation its header (code, argument count, the 1-based indices of its keys in KEYS), then its arguments.
 */
export function encodeBatch(ops: readonly { op: BatchOp; keys: readonly string[]; args: readonly (string | number)[] }[]): {
  keys: string[];
  argv: (string | number)[];
} {
  const keys: string[] = [];
  const index = new Map<string, number>();
  const argv: (string | number)[] = [];
  for (const p of ops) {
    let header = `${p.op}${p.args.length}`;
    for (const k of p.keys) {
      let i = index.get(k);
      if (i === undefined) {
        i = keys.push(k);
        index.set(k, i);
      }
      header += `,${i}`;
    }
    argv.push(header);
    for (const a of p.args) argv.push(a);
  }
  return { keys, argv };
}
