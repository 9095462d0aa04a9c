/*
 * idem_store_redis_lua.c - the Redis store's Lua scripts: each operation
 * on a record is one script, atomic on the server, timed by the server's
 * clock (TIME, in microseconds).
 *
 * The layout (DESIGN.md 3, "The Redis store"): a record is the hash
 *   PREFIX{BB}:SCOPE:KEY
 * (BB the key's bucket, two hex digits; SCOPE the scope hash in hex; KEY
 * the key as sent), with the fields
 *   st  state (idem_record_state_names)    fp  fingerprint (32 bytes)
 *   o   owner token        r  request id   ra  reserved at (us)
 *   la  lease at (us)      lm lease (ms)   ea  expires at (us)
 *   s   status   h headers   b body        ph  phase   pg  progress
 *   tm  tombstone's length (ms)
 * and each bucket has the sorted set PREFIX{BB}:i of its records' SCOPE:KEY
 * by their expiry (us), which the purge walks; the sorted set PREFIX{BB}:u
 * of its records of unknown outcome by their reservation's time, and the
 * count PREFIX{BB}:t of its tombstones (state expired), which the
 * metrics read without a scan.  The braces are a hash tag:
 * a record and its bucket's index are on one slot of a cluster, so every
 * script names keys of one slot.
 *
 * Every script's KEYS[1] is the record (the purge's and the walks': the
 * index), KEYS[2] the index; ARGV as each says.  A number handed to
 * redis.call is written as %.17g, exact for integers below 2^53 (the
 * times in microseconds are); a number returned is an integer reply.
 * An index's score is never after its record's expiry: a commit that
 * moves the expiry on leaves the score as it was (one write less on the
 * hot path), and the purge scores such a record again when it meets it.
 */
#include "config.h"

#include "idem_store_redis_int.h"

/* what every script begins with */
#define PRELUDE \
	"local t = redis.call('TIME') " \
	"local now = tonumber(t[1]) * 1000000 + tonumber(t[2]) " \
	"local function n(x) return tonumber(x) or 0 end "

/* the rule's LAPSED: a lease past its length (v: la, lm) */
#define LAPSED(la, lm) "(n(" la ") < now - n(" lm ") * 1000)"
/* a committed record, or one of unknown outcome, past its expiry whose
 * tombstone has not ended (what a purge makes a tombstone) */
#define TOMB_DUE(st, ea, tm) "((" st " == 'committed' or " st " == " \
	"'unknown') and n(" ea ") <= now and n(" tm ") > 0 and n(" ea ") + " \
	"n(" tm ") * 1000 > now)"
/* held: in flight, or of unknown outcome while it is reconciled */
#define HELD(st) "(" st " == 'in_flight' or " st " == 'unknown')"
/* the bucket's set of records of unknown outcome, and its count of
 * tombstones, by the index's name (KEYS[2]: PREFIX{BB}:i) */
#define UKEY "(string.sub(KEYS[2], 1, -2) .. 'u')"
#define TKEY "(string.sub(KEYS[2], 1, -2) .. 't')"
/* the fields a reserve reads of a record it met, in idem_rds_row's
 * order */
#define ROW_FIELDS "'st', 'fp', 'o', 'r', 'ra', 'la', 'lm', 'ea', 's', " \
	"'h', 'b', 'ph', 'pg', 'tm'"

const char *const idem_rds_lua[R_NSCRIPT] = {
	/* ARGV: fp, owner, rid, lease ms, lifetime us, member.  {1, now}
	 * when it made the record; else {0, now, the record's fields} */
	[R_RESERVE] = PRELUDE
	    "if redis.call('EXISTS', KEYS[1]) == 0 then "
	    "local ea = now + n(ARGV[5]) "
	    "redis.call('HSET', KEYS[1], 'st', 'in_flight', 'fp', ARGV[1], "
	    "'o', ARGV[2], 'r', ARGV[3], 'ra', now, 'la', now, 'lm', "
	    "ARGV[4], 'ea', ea) "
	    "redis.call('ZADD', KEYS[2], ea, ARGV[6]) "
	    "return {1, now} end "
	    "return {0, now, redis.call('HMGET', KEYS[1], " ROW_FIELDS ")}",
	/* the record as a reserve reads it: {0, now, fields}, {0, now} when
	 * there is none */
	[R_READ] = PRELUDE
	    "if redis.call('EXISTS', KEYS[1]) == 0 then return {0, now} end "
	    "return {0, now, redis.call('HMGET', KEYS[1], " ROW_FIELDS ")}",
	/* the rule's TAKE_OVER, on the old owner's stale lease.  ARGV:
	 * owner, rid, lease ms, lifetime us, old owner, fp, member */
	[R_TAKEOVER] = PRELUDE
	    "local v = redis.call('HMGET', KEYS[1], 'st', 'o', 'fp', 'la', "
	    "'lm') "
	    "if v[1] ~= 'in_flight' or v[2] ~= ARGV[5] or v[3] ~= ARGV[6] or "
	    "not " LAPSED("v[4]", "v[5]") " then return 0 end "
	    "local ea = now + n(ARGV[4]) "
	    "redis.call('HSET', KEYS[1], 'o', ARGV[1], 'r', ARGV[2], 'la', "
	    "now, 'lm', ARGV[3], 'ea', ea) "
	    "redis.call('ZADD', KEYS[2], ea, ARGV[7]) return 1",
	/* the rule's REUSE: expired (or abandoned), as if absent, and a live
	 * tombstone only when the policy runs expired keys.  ARGV: fp,
	 * owner, rid, lease ms, lifetime us, abandon us, run expired (1 or
	 * 0), member */
	[R_REUSE] = PRELUDE
	    "local v = redis.call('HMGET', KEYS[1], 'st', 'ea', 'la', 'lm', "
	    "'tm') "
	    "if not v[1] then return 0 end "
	    "local st, ea = v[1], n(v[2]) "
	    "if not (st == 'expired' or ea <= now and (st ~= 'in_flight' or ("
	    LAPSED("v[3]", "v[4]") " and n(v[3]) < now - n(ARGV[6])))) then "
	    "return 0 end "
	    "if ARGV[7] ~= '1' and (st == 'expired' and ea > now or "
	    TOMB_DUE("st", "v[2]", "v[5]") ") then return 0 end "
	    "local nea = now + n(ARGV[5]) "
	    "if st == 'unknown' then redis.call('ZREM', " UKEY ", ARGV[8]) end "
	    "if st == 'expired' then redis.call('DECR', " TKEY ") end "
	    "redis.call('DEL', KEYS[1]) "
	    "redis.call('HSET', KEYS[1], 'st', 'in_flight', 'fp', ARGV[1], "
	    "'o', ARGV[2], 'r', ARGV[3], 'ra', now, 'la', now, 'lm', "
	    "ARGV[4], 'ea', nea) "
	    "redis.call('ZADD', KEYS[2], nea, ARGV[8]) return 1",
	/* the rule's RESUME: a paused record, by the same request, within
	 * its lifetime.  ARGV: owner, rid, lease ms, fp */
	[R_RESUME] = PRELUDE
	    "local v = redis.call('HMGET', KEYS[1], 'st', 'fp', 'ea') "
	    "if v[1] ~= 'paused' or v[2] ~= ARGV[4] or n(v[3]) <= now then "
	    "return 0 end "
	    "redis.call('HSET', KEYS[1], 'st', 'in_flight', 'o', ARGV[1], 'r', "
	    "ARGV[2], 'la', now, 'lm', ARGV[3]) return 1",
	/* the rule's RECONCILE: unknown, held by nobody or by a lapsed
	 * lease, conditionally on that holder.  ARGV: owner, rid, lease
	 * ms, fp, old owner */
	[R_RECONCILE] = PRELUDE
	    "local v = redis.call('HMGET', KEYS[1], 'st', 'fp', 'o', 'la', "
	    "'lm', 'ea') "
	    "if v[1] ~= 'unknown' or v[2] ~= ARGV[4] or v[3] ~= ARGV[5] or "
	    "n(v[6]) <= now or not (v[3] == '' or " LAPSED("v[4]", "v[5]")
	    ") then return 0 end "
	    "redis.call('HSET', KEYS[1], 'o', ARGV[1], 'r', ARGV[2], 'la', "
	    "now, 'lm', ARGV[3]) return 1",
	/* the owner's commit; its index's score left as it was unless the
	 * expiry comes earlier than before.  ARGV: owner, status, headers,
	 * body, lifetime us, tombstone ms, member */
	[R_COMMIT] = PRELUDE
	    "local v = redis.call('HMGET', KEYS[1], 'st', 'o', 'ea') "
	    "if not " HELD("v[1]") " or v[2] ~= ARGV[1] then return 0 end "
	    "local ea = now + n(ARGV[5]) "
	    "redis.call('HSET', KEYS[1], 'st', 'committed', 's', ARGV[2], 'h', "
	    "ARGV[3], 'b', ARGV[4], 'ea', ea, 'la', now, 'tm', ARGV[6]) "
	    "if ea < n(v[3]) then redis.call('ZADD', KEYS[2], ea, ARGV[7]) end "
	    "if v[1] == 'unknown' then redis.call('ZREM', " UKEY ", ARGV[7]) "
	    "end return 1",
	/* the owner's release: deleted (1), or paused when it has progress
	 * (2).  ARGV: owner, member */
	[R_RELEASE] = PRELUDE
	    "local v = redis.call('HMGET', KEYS[1], 'st', 'o', 'ph') "
	    "if v[1] ~= 'in_flight' or v[2] ~= ARGV[1] then return 0 end "
	    "if v[3] then redis.call('HSET', KEYS[1], 'st', 'paused') return 2 "
	    "end "
	    "redis.call('DEL', KEYS[1]) redis.call('ZREM', KEYS[2], ARGV[2]) "
	    "return 1",
	/* the owner's renewal.  ARGV: owner, lease ms ('': kept) */
	[R_RENEW] = PRELUDE
	    "local v = redis.call('HMGET', KEYS[1], 'st', 'o') "
	    "if not " HELD("v[1]") " or v[2] ~= ARGV[1] then return 0 end "
	    "redis.call('HSET', KEYS[1], 'la', now) "
	    "if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'lm', ARGV[2]) "
	    "end return 1",
	/* the owner's checkpoint, a renewal too.  ARGV: owner, phase, state,
	 * lease ms ('': kept) */
	[R_CHECKPOINT] = PRELUDE
	    "local v = redis.call('HMGET', KEYS[1], 'st', 'o') "
	    "if not " HELD("v[1]") " or v[2] ~= ARGV[1] then return 0 end "
	    "redis.call('HSET', KEYS[1], 'ph', ARGV[2], 'pg', ARGV[3], 'la', "
	    "now) "
	    "if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'lm', ARGV[4]) "
	    "end return 1",
	/* the owner's mark of unknown outcome: held by nobody, and in the
	 * bucket's set of them.  ARGV: owner, tombstone ms, member */
	[R_UNKNOWN] = PRELUDE
	    "local v = redis.call('HMGET', KEYS[1], 'st', 'o', 'ra') "
	    "if not " HELD("v[1]") " or v[2] ~= ARGV[1] then return 0 end "
	    "redis.call('HSET', KEYS[1], 'st', 'unknown', 'o', '', 'la', "
	    "now, 'tm', ARGV[2]) "
	    "redis.call('ZADD', " UKEY ", n(v[3]), ARGV[3]) return 1",
	/* an operator's answer for a record of unknown outcome, its expiry
	 * kept.  ARGV: owner, status, headers, body, tombstone ms, member */
	[R_RESOLVE] = PRELUDE
	    "local v = redis.call('HMGET', KEYS[1], 'st', 'o', 'ea') "
	    "if v[1] ~= 'unknown' or v[2] ~= ARGV[1] or n(v[3]) <= now then "
	    "return 0 end "
	    "redis.call('HSET', KEYS[1], 'st', 'committed', 's', ARGV[2], 'h', "
	    "ARGV[3], 'b', ARGV[4], 'la', now, 'tm', ARGV[5]) "
	    "redis.call('ZREM', " UKEY ", ARGV[6]) return 1",
	/* an operator's release of a record of unknown outcome.  ARGV:
	 * owner, member */
	[R_RESOLVE_RELEASE] = PRELUDE
	    "local v = redis.call('HMGET', KEYS[1], 'st', 'o') "
	    "if v[1] ~= 'unknown' or v[2] ~= ARGV[1] then return 0 end "
	    "redis.call('DEL', KEYS[1]) redis.call('ZREM', KEYS[2], ARGV[2]) "
	    "redis.call('ZREM', " UKEY ", ARGV[2]) return 1",
	/* what idemfcgi-admin shows: {now, st, fp, o, r, ra, la, lm, ea, s,
	 * length of h, length of b, ph, tm}, {} when there is none */
	[R_LOOKUP] = PRELUDE
	    "if redis.call('EXISTS', KEYS[1]) == 0 then return {} end "
	    "local v = redis.call('HMGET', KEYS[1], 'st', 'fp', 'o', 'r', 'ra', "
	    "'la', 'lm', 'ea', 's', 'ph', 'tm') "
	    "return {now, v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], "
	    "v[9], redis.call('HSTRLEN', KEYS[1], 'h'), redis.call('HSTRLEN', "
	    "KEYS[1], 'b'), v[10], v[11]}",
	/* one bucket's purge (KEYS[1] its index): at most ARGV[1] records
	 * made tombstones or deleted, due by their expiry; an in-flight one
	 * only when abandoned (ARGV[2]: abandon us); one whose lease is
	 * live, or lapsed less than that ago, skipped.  Returns how many */
	[R_PURGE] = PRELUDE
	    "local base = string.sub(KEYS[1], 1, -2) "
	    "local max, ab, done, skip = n(ARGV[1]), n(ARGV[2]), 0, 0 "
	    "while done < max and skip < 10000 do "
	    "local m = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, "
	    "'LIMIT', skip, 100) "
	    "if #m == 0 then break end "
	    "for _, mem in ipairs(m) do "
	    "if done >= max then break end "
	    "local k = base .. mem "
	    "local v = redis.call('HMGET', k, 'st', 'ea', 'la', 'lm', 'tm') "
	    "local st, ea = v[1], n(v[2]) "
	    "if not st then redis.call('ZREM', KEYS[1], mem) "
	    "elseif ea > now then redis.call('ZADD', KEYS[1], v[2], mem) "
	    "elseif " TOMB_DUE("st", "v[2]", "v[5]") " then "
	    "local te = ea + n(v[5]) * 1000 "
	    "redis.call('HDEL', k, 'h', 'b', 'ph', 'pg') "
	    "redis.call('HSET', k, 'st', 'expired', 'ea', te) "
	    "redis.call('ZADD', KEYS[1], te, mem) "
	    "if st == 'unknown' then redis.call('ZREM', base .. 'u', mem) end "
	    "redis.call('INCR', base .. 't') done = done + 1 "
	    "elseif st ~= 'in_flight' or (" LAPSED("v[3]", "v[4]") " and "
	    "n(v[3]) < now - ab) then "
	    "redis.call('DEL', k) redis.call('ZREM', KEYS[1], mem) "
	    "if st == 'unknown' then redis.call('ZREM', base .. 'u', mem) end "
	    "if st == 'expired' then redis.call('DECR', base .. 't') end "
	    "done = done + 1 "
	    "else skip = skip + 1 end end end "
	    "return done",
	/* one bucket's records by state (KEYS[1] its index), for stats and
	 * the census (ARGV[1]: the lease of a record that keeps none, ms):
	 * {entries, in flight, stale, committed live, expired, paused live,
	 * unknown live, unknown (all), tombstones, oldest unknown's
	 * reserved at, oldest in flight's member, owner, rid, reserved at,
	 * lease at}; now first */
	[R_COUNT] = PRELUDE
	    "local base = string.sub(KEYS[1], 1, -2) "
	    "local c = {0, 0, 0, 0, 0, 0, 0, 0, 0} "
	    "local ou, om, oo, orid, ora, ola = 0, '', '', '', 0, 0 "
	    "local i = 0 "
	    "while true do "
	    "local m = redis.call('ZRANGE', KEYS[1], i, i + 999) "
	    "if #m == 0 then break end i = i + #m "
	    "for _, mem in ipairs(m) do "
	    "local v = redis.call('HMGET', base .. mem, 'st', 'ea', 'la', 'lm', "
	    "'tm', 'ra', 'o', 'r') "
	    "local st, ea = v[1], n(v[2]) "
	    "if st then c[1] = c[1] + 1 "
	    "local live = ea > now "
	    "if st == 'in_flight' then c[2] = c[2] + 1 "
	    "local lm = n(v[4]) if lm == 0 then lm = n(ARGV[1]) end "
	    "if n(v[3]) < now - lm * 1000 then c[3] = c[3] + 1 end "
	    "if ora == 0 or n(v[6]) < ora then om, oo, orid, ora, ola = mem, "
	    "v[7], v[8], n(v[6]), n(v[3]) end "
	    "else "
	    "local tomb = st == 'expired' and live or " TOMB_DUE("st", "v[2]",
	    "v[5]") " "
	    "if tomb then c[9] = c[9] + 1 "
	    "elseif not live then c[5] = c[5] + 1 "
	    "elseif st == 'committed' then c[4] = c[4] + 1 "
	    "elseif st == 'paused' then c[6] = c[6] + 1 "
	    "elseif st == 'unknown' then c[7] = c[7] + 1 end "
	    "if st == 'unknown' then c[8] = c[8] + 1 "
	    "if ou == 0 or n(v[6]) < ou then ou = n(v[6]) end end "
	    "end end end end "
	    "return {now, c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], "
	    "c[9], ou, om, oo, orid, ora, ola}",
	/* one bucket's records of unknown outcome (KEYS[1] its index; their
	 * set), the ARGV[1] marked longest ago: {now, then per record:
	 * member, fp, o, r, ph, ra, la, ea}, sorted by la */
	[R_UNKNOWNS] = PRELUDE
	    "local base = string.sub(KEYS[1], 1, -2) "
	    "local out = {} "
	    "for _, mem in ipairs(redis.call('ZRANGE', base .. 'u', 0, -1)) do "
	    "local v = redis.call('HMGET', base .. mem, 'st', 'fp', 'o', 'r', "
	    "'ph', 'ra', 'la', 'ea') "
	    "if v[1] == 'unknown' then table.insert(out, {mem, v[2], v[3], "
	    "v[4], v[5] or '', v[6], v[7], v[8]}) end end "
	    "table.sort(out, function(a, b) if n(a[7]) ~= n(b[7]) then return "
	    "n(a[7]) < n(b[7]) end return a[1] < b[1] end) "
	    "local r = {now} "
	    "for j = 1, math.min(#out, n(ARGV[1])) do "
	    "for _, x in ipairs(out[j]) do table.insert(r, x) end end "
	    "return r",
	/* one bucket's counts for the metrics, without a scan (KEYS[1] its
	 * index): {now, records of unknown outcome, the oldest one's
	 * reservation time (0: none), tombstones} */
	[R_STATS] = PRELUDE
	    "local base = string.sub(KEYS[1], 1, -2) "
	    "local o = redis.call('ZRANGE', base .. 'u', 0, 0, 'WITHSCORES') "
	    "return {now, redis.call('ZCARD', base .. 'u'), n(o[2]), "
	    "n(redis.call('GET', base .. 't'))}",
	/* one bucket's in-flight records of owners of prefix ARGV[1] (a dead
	 * worker's) released as their owners would: deleted, or paused with
	 * their progress.  Returns their members */
	[R_RELEASE_PREFIX] = PRELUDE
	    "local base = string.sub(KEYS[1], 1, -2) "
	    "local out, i = {}, 0 "
	    "while true do "
	    "local m = redis.call('ZRANGE', KEYS[1], i, i + 999) "
	    "if #m == 0 then break end "
	    "local gone = 0 "
	    "for _, mem in ipairs(m) do "
	    "local k = base .. mem "
	    "local v = redis.call('HMGET', k, 'st', 'o', 'ph') "
	    "if v[1] == 'in_flight' and string.sub(v[2], 1, #ARGV[1]) == "
	    "ARGV[1] then table.insert(out, mem) "
	    "if v[3] then redis.call('HSET', k, 'st', 'paused') "
	    "else redis.call('DEL', k) redis.call('ZREM', KEYS[1], mem) "
	    "gone = gone + 1 end end end "
	    "i = i + #m - gone end "
	    "return out",
};
