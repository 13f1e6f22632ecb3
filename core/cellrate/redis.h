/*
 * cellrate/redis.h: the protocol of the Redis store (docs/design.md §11).
 *
 * A part of cellrate.h (include <cellrate.h>). What both faces' Redis stores
 * must agree on, written once: the words a request sends to the server
 * script (redis/decide.lua) after EVALSHA and its SHA, a key's name, the
 * reading of the script's reply and of an error reply, the answers of the
 * deny cache, on_error's invented answers while Redis cannot decide, and the
 * probe's back-off. The faces keep the transport (connections, the client's
 * calls, sleeping) and translate.
 *
 * Every function is pure: no I/O, no clock (the caller passes its instants),
 * no allocation (the caller passes the buffers); thread-safe. The script
 * runs inside Redis and stays self-contained: its constants are the ones
 * below, held equal by the tests (tests/vectors/redis.txt).
 */
#ifndef CELLRATE_REDIS_H
#define CELLRATE_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decision.h"
#include "limit.h"
#include "penalty.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility push(default)
#endif

/* A tolerance (or window) the script carries exactly: below 9e15 ns (104
 * days; every time it adds stays one exact double). */
#define CR_REDIS_MAX_TOLERANCE_NS INT64_C(9000000000000000)

/* How far after now a charge may leave a gcra key's TAT in the script, beside
 * the limit's max_debt (the core's own bound, CR_DEBT_MAX_NS, is beyond what
 * one double carries). */
#define CR_REDIS_MAX_DEBT_NS INT64_C(9000000000000000)

/* The start of the script's error reply for a key held under another
 * algorithm than the one sent ("ERR cellrate: algorithm: the keys of this
 * name hold ..."): the mistake's own words start at "algorithm:". */
#define CR_REDIS_ALGORITHM_REPLY "cellrate: algorithm:"

/* The key of the fallback's store (on_error="fallback") that marks Redis found
 * back: a process that finds Redis deciding again after an outage charges it
 * one unit, and a process still held back by its back-off that reads it
 * changed (its state read at instant 0, a function of what was written alone)
 * tries Redis at once, so the processes of one region go back together. No
 * store's key can be it (a store's key has ':' after its name, a prefix and a
 * name no braces). */
#define CR_REDIS_BACK_KEY "cellrate{back}"

/* The longest a refusal kept by the deny cache answers without Redis, whatever
 * its retry_after: a reset, a plan or a limit changed by another host (a quota's
 * refusal lasts to the period's end) is seen within it, for one round trip per
 * refused key and process a second. */
#define CR_REDIS_DENY_CACHE_MAX_NS INT64_C(1000000000)

/* While Redis cannot decide, a probe tries it after a back-off that doubles
 * from the first up to the largest (cr_redis_backoff). */
#define CR_REDIS_FIRST_BACKOFF_NS INT64_C(50000000)
#define CR_REDIS_MAX_BACKOFF_NS INT64_C(1000000000)

/* The script's modes: its ARGV[1], one decimal digit. */
typedef enum cr_redis_mode {
    CR_REDIS_PEEK = 0,   /* a decision that commits nothing */
    CR_REDIS_CHECK = 1,  /* a decision, committed when admitted */
    CR_REDIS_ALLOW = 2,  /* check, an admission answered by the integer 1 alone */
    CR_REDIS_REFUND = 3, /* cr_refund of one key: 1 when its state changed, else 0 */
    CR_REDIS_CHARGE = 4, /* cr_charge of one key: check's reply and clipped */
    CR_REDIS_TAKE = 5,   /* cr_take of one key: the units taken */
    /* peek, check and allow of one key in a priority class (the item's
     * `priority`): the class's reserve in ns is sent after the limit's words,
     * the reply is the plain mode's (docs/design/priorities.md) */
    CR_REDIS_PEEK_CLASS = 6,
    CR_REDIS_CHECK_CLASS = 7,
    CR_REDIS_ALLOW_CLASS = 8
} cr_redis_mode;

/* The plain mode of a class's mode (peek, check, allow); any other itself. */
cr_redis_mode cr_redis_plain_mode(cr_redis_mode mode);

/* CR_OK when the script carries `limit` exactly (tolerance_ns below
 * CR_REDIS_MAX_TOLERANCE_NS), else CR_E_REDIS_TOLERANCE, naming burst. */
cr_status cr_redis_check_limit(const cr_limit *limit);

/* The Redis key of `key` under the limit named `name`: `prefix`, `name`, ':'
 * and `key`; with `key` NULL (a concurrency limit without keys) `prefix` and
 * `name` alone. Writes at most `size` bytes into `buf` (no NUL: a key is any
 * bytes) and returns the key's whole length. */
size_t cr_redis_key(char *buf, size_t size, const char *prefix, size_t prefix_len, const char *name,
                    size_t name_len, const char *key, size_t key_len);

/* The signature of `limit` that the script writes with each value (the
 * limit a key's state was written under) and that names an unnamed limit's
 * keys: "<algorithm>:<tolerance_ns>:<burst>". As snprintf: writes at most
 * `size` bytes, NUL included, and returns the whole text's length. */
size_t cr_redis_signature(char *buf, size_t size, const cr_limit *limit);

/* One limit of a request: the limit sent and what names its key. */
typedef struct cr_redis_item {
    const cr_limit *limit;
    const char *prefix;
    size_t prefix_len;
    const char *name;
    size_t name_len;
    const char *key;
    size_t key_len;
    int32_t priority; /* a class's mode: the class's index (cr_priority_find); else unread */
    const cr_penalty *penalty; /* the limit's penalty (CR_REDIS_PENALTY), or NULL: none */
} cr_redis_item;

/* A word of a request: `len` bytes at `offset` in the request's buffer. */
typedef struct cr_redis_word {
    size_t offset;
    size_t len;
} cr_redis_word;

/* The most words a request of `nitems` limits has (the wipe marker's and a
 * penalty's included). */
#define CR_REDIS_REQUEST_WORDS(nitems) (11 + 5 * (size_t)(nitems))

/* The bytes a request of these items needs at most (cr_redis_request's
 * `size`); SIZE_MAX when that does not fit a size_t. */
size_t cr_redis_request_size(const cr_redis_item *items, size_t nitems);

/*
 * on_wipe="refuse" (docs/design/redis.md, "A wiped Redis"): or'ed into the
 * mode of cr_redis_request, the request carries one more key after the
 * items', the wipe marker of its first item's key (cr_redis_wipe_marker).
 * The script reads a key missing while that marker is missing as a Redis
 * that lost its state: it writes the marker (the instant found) and reads
 * every key missing from then on as fully used at that instant, so a wipe
 * hands out no fresh burst; a key idle for a period reads as fresh again.
 */
#define CR_REDIS_WIPE_MARKER 16

/*
 * The penalty box through Redis (docs/design/penalty.md): a check or an allow
 * of one key whose item has a penalty (cr_redis_item.penalty) is sent with
 * this bit added to the mode's word (65, 66), one more key last, the key's
 * penalty key (cr_redis_penalty_key), and the penalty's word after the
 * limit's, "<after>:<strike_ns>:<ban_ns>:<max_ban_ns>" (one word: each word
 * more costs every admission about 1,500 server instructions, its Lua
 * string). The script reads that key
 * only when it refuses: cr_penalty_refused's rule on the strikes it holds,
 * "<strikes> <ban_end> <level>" (ns, decimal), and a ban that starts is
 * written into the key's state as cr_ban_core writes it. Any other request
 * sends no penalty (peek, a class, refund, charge, take, several limits).
 * Or'ed into the mode given to cr_redis_remember: the deny cache keeps no
 * refusal (each refusal is a strike the server counts).
 */
#define CR_REDIS_PENALTY 64

/* CR_OK when the script carries `penalty` exactly (the strikes' span,
 * strike_ns * after, and max_ban_ns below CR_REDIS_MAX_TOLERANCE_NS), else
 * CR_E_REDIS_PENALTY. */
cr_status cr_redis_check_penalty(const cr_penalty *penalty);

/*
 * The penalty key of the Redis key `prefix name ":" key` (cr_redis_key):
 * `prefix`, `name`, "{TTTT}:" and `key`, TTTT the four letters of the wipe
 * marker of that key's slot (cr_redis_wipe_marker), so the two share a
 * Cluster slot whatever hash tag the key holds (a prefix and a name hold no
 * brace: the tag is the first). Writes at most `size` bytes (no NUL) and
 * returns the whole length.
 */
size_t cr_redis_penalty_key(char *buf, size_t size, const char *prefix, size_t prefix_len,
                            const char *name, size_t name_len, const char *key, size_t key_len);

/* The bits of a request's mode that name the script's mode (the rest: flags). */
#define CR_REDIS_MODE_BITS 15

/* A key's Redis Cluster hash slot (0 to 16383): CRC16 (XMODEM) of its hash
 * tag (the bytes between its first '{' and the first '}' after it, when
 * there are some), else of the whole key, modulo 16384. */
int64_t cr_redis_slot(const char *key, size_t len);

/*
 * The wipe marker of the Redis key `key`: "cellrate{TTTT}", TTTT the four
 * letters of '@' to 'O' (each 0x40 plus a hex digit) that hash to the key's
 * slot (cr_redis_slot), the least as a hex number. So a marker shares its
 * key's slot in a Cluster, and a server has at most 16,384 markers, whatever
 * the prefixes (a wipe is the server's); no store's key has a '{' there (a
 * prefix and a name hold none). Writes at most `size` bytes into `buf` (no
 * NUL) and returns the whole length, 14.
 */
#define CR_REDIS_WIPE_MARKER_PREFIX "cellrate"
size_t cr_redis_wipe_marker(char *buf, size_t size, const char *key, size_t key_len);

/*
 * A request's words after EVALSHA and the script's SHA, in order: numkeys;
 * KEYS, one per item (cr_redis_key), then with CR_REDIS_WIPE_MARKER the first
 * item's wipe marker, then with a penalty (CR_REDIS_PENALTY) its penalty key; ARGV: the mode's digit, the cost (a
 * take's max_cost), per item its limit's algorithm name, emission_ns,
 * tolerance_ns and burst, then a charge's max_debt (units), then a class's
 * reserve_ns (a class's mode: one item, the class of its `priority`), then
 * a penalty's word (CR_REDIS_PENALTY), then `now_ns` unless it is CR_CLOCK (the script reads the server's TIME); numbers in
 * decimal. Written into `buf` (`size` bytes: cr_redis_request_size) and
 * located by `words` (CR_REDIS_REQUEST_WORDS(nitems) of them); *count is
 * their number. Refuses what every decision refuses (cr_check_call: CR_E_NOW,
 * CR_E_COST, a take's CR_E_MAX_COST), a limit the script cannot carry
 * (cr_redis_check_limit), no item or several for a refund, a charge or a take
 * (CR_E_ITEMS), several for a class (CR_E_PRIORITY_SEVERAL), a class the
 * limit lacks (CR_E_PRIORITY, CR_E_PRIORITY_NONE); CR_E_NOMEM when `size` is short. Nothing is written then.
 */
cr_status cr_redis_request(cr_redis_mode mode, int64_t cost, int64_t now_ns,
                           const cr_redis_item *items, size_t nitems, char *buf, size_t size,
                           cr_redis_word *words, size_t *count);

/*
 * The items of a Redis check_all (several limits decided as one script call),
 * each named by its client's identity as the face sees it (`clients[i]`, any
 * value the face gives alike to one client and unlike to another; 0: the item
 * is not a (Redis rate limiter, key) pair). CR_E_REDIS_ITEMS for no item or an
 * item that is no such pair, CR_E_REDIS_CLIENT for one of another client than
 * the first's (one call reaches one server); the first offence in order.
 */
cr_status cr_redis_check_items(const uintptr_t *clients, size_t nitems);

/*
 * A live change of a Redis rate limit (reconfigure): CR_E_REDIS_NAME_NEEDED
 * for a limit without a name (`named` false: its keys are named by its
 * parameters); CR_E_REDIS_ALGORITHM_KEPT when `given` (`given_len` bytes;
 * NULL: none given) names another algorithm than the limit's `algorithm`.
 */
cr_status cr_redis_check_change(bool named, const char *algorithm, size_t algorithm_len,
                                const char *given, size_t given_len);

/*
 * The plans of a Redis rate limit (docs/design/plans.md), `table` as
 * cr_plans_set made it: each plan is a limit the script carries exactly
 * (cr_redis_check_limit, naming burst), and the limit has a name
 * (CR_E_REDIS_PLANS_NAME: a key decided under another plan than last time
 * carries what it used in the script, as a live change does, and an unnamed
 * limit's keys may hold the layout before names, a bare state word the
 * script reads under whatever limit is sent). The stored value's signature
 * is the limit, so the plan, a key was last decided under: no other word.
 */
struct cr_plan_table;
cr_status cr_redis_check_plans(bool named, const struct cr_plan_table *table);

/*
 * A batch: several decisions in one script call (redis/batch.lua, which runs
 * redis/decide.lua once per decision, in order, each on the state the ones
 * before it wrote: a key named twice decides the second time as if sent after
 * the first). Each decision is one request's mode, cost and items, as
 * cr_redis_request takes them; the batch's reply is a list holding each
 * decision's reply (or error reply) in order, each read by cr_redis_read_reply.
 */
typedef struct cr_redis_call {
    cr_redis_mode mode;
    int64_t cost;
    const cr_redis_item *items;
    size_t nitems;
} cr_redis_call;

/* The most decisions of one script call: a longer batch goes as several calls
 * (the faces split it in order). It bounds how long one call holds the
 * server (about 256 single decisions' work). */
#define CR_REDIS_BATCH_MAX 256

/* The most words a batch of `ncalls` decisions of `nitems` items in all has. */
#define CR_REDIS_BATCH_WORDS(ncalls, nitems) (2 + 13 * (size_t)(ncalls) + 5 * (size_t)(nitems))

/* The bytes a batch of these calls needs at most (cr_redis_batch's `size`);
 * SIZE_MAX when that does not fit a size_t. */
size_t cr_redis_batch_size(const cr_redis_call *calls, size_t ncalls);

/*
 * A batch's words after EVALSHA and the batch script's SHA: numkeys (every
 * call's keys); KEYS, every call's keys in order (a call whose mode has
 * CR_REDIS_WIPE_MARKER or'ed in: its items' keys, then its wipe marker, then
 * under a penalty its penalty key, as cr_redis_request writes them); ARGV: the number of calls, then per call its
 * number of keys, its number of ARGV words and its ARGV words exactly as
 * cr_redis_request writes them (`now_ns` for every call).
 * Refuses what cr_redis_request refuses of any call (the first such call's
 * status), no call (CR_E_ITEMS), more than CR_REDIS_BATCH_MAX calls
 * (CR_E_REDIS_BATCH); CR_E_NOMEM when `size` is short. *failed (may be NULL)
 * is the refused call's index (ncalls: the batch itself).
 */
cr_status cr_redis_batch(const cr_redis_call *calls, size_t ncalls, int64_t now_ns, char *buf,
                         size_t size, cr_redis_word *words, size_t *count, size_t *failed);

/* A batch's reply: a list (`is_list`) of exactly `ncalls` elements (element i
 * answers call i), else CR_E_REDIS_REPLY. An element that is a list of one
 * string is its decision's error reply, the string its words (the first word
 * the error's, as cr_redis_classify reads it); any other element is the
 * decision's reply (cr_redis_read_reply). */
cr_status cr_redis_batch_reply(size_t ncalls, bool is_list, size_t nelements);

/*
 * A command as a Redis client sends it (RESP: an array of bulk strings): the
 * `nhead` words `head` (`head_len` bytes each; e.g. EVALSHA and a script's SHA),
 * then the `count` words `words` of `buf` (a request's or a batch's). Returns
 * the bytes the command takes; writes them to `out` only when they fit `size`
 * (SIZE_MAX: more than a size_t). So a face sends a whole batch as one buffer,
 * packed here rather than word by word by its client library.
 */
size_t cr_redis_command(const char *const *head, const size_t *head_len, size_t nhead,
                        const char *buf, const cr_redis_word *words, size_t count, char *out,
                        size_t size);

/* A decimal integer of a reply (the script answers times of 9e15 ns and more
 * as decimal strings): CR_E_REDIS_REPLY unless `text` is [-]digits within
 * int64. */
cr_status cr_redis_parse_integer(const char *text, size_t len, int64_t *value);

/* What a script call answered, read. */
typedef struct cr_redis_answer {
    cr_decision decision; /* peek, check, allow and charge (clipped: the debt met its bound) */
    size_t index;         /* the item whose decision it is, from 0 */
    int64_t count;        /* take: the units taken; refund: 1 when the state changed, else 0 */
} cr_redis_answer;

/*
 * The script's reply to a request of `mode` for `limits` (the request's
 * items' limits, in order), read: an integer reply is one field and
 * `is_list` false; a list reply's elements are `fields` (decimal strings read
 * by cr_redis_parse_integer). A decision's limit is its item's burst, a
 * retry_after of -1 is CR_NEVER; allow's admission (the integer 1) is
 * remaining 0, no wait. CR_E_REDIS_REPLY for anything the script never
 * answers to that request.
 */
cr_status cr_redis_read_reply(cr_redis_mode mode, bool is_list, const int64_t *fields,
                              size_t nfields, const cr_limit *const *limits, size_t nlimits,
                              cr_redis_answer *out);

/* What a failed call means. */
typedef enum cr_redis_failure {
    CR_REDIS_CANNOT_DECIDE = 0,   /* Redis cannot decide now: on_error answers */
    CR_REDIS_MISTAKE = 1,         /* reported whatever on_error says */
    CR_REDIS_WRONG_ALGORITHM = 2, /* the key holds another algorithm: an argument mistake
                                     naming algorithm, in the script's words */
    CR_REDIS_CROSS_SLOT = 3,      /* keys of several Cluster hash slots: an argument mistake
                                     naming items (cr_redis_slots_message) */
    CR_REDIS_NO_SCRIPT = 4        /* the script is not loaded: send it again with EVAL */
} cr_redis_failure;

/* The first words of the error replies that mean "Redis cannot decide now"
 * (full, busy, loading, read-only, failing over, short of replicas, a
 * cluster reshaping): the `i`-th, NULL past the last. */
const char *cr_redis_unavailable_reply(size_t i);

/*
 * What a failure means. `word`: the error reply's first word as the client
 * reports it ("OOM", "WRONGTYPE"), or NULL (or empty) when no reply reached
 * the client (no connection, no answer in time): Redis cannot decide.
 * `text`: the failure's message, which for a key held under another algorithm
 * holds the script's words; *message_at (may be NULL) is then the offset in
 * `text` of the mistake's own words, "algorithm: ...".
 */
cr_redis_failure cr_redis_classify(const char *word, size_t word_len, const char *text,
                                   size_t text_len, size_t *message_at);

/*
 * The message of one call's keys in several Cluster hash slots: the words of
 * CR_E_REDIS_SLOTS (naming items), then each key once, in order, quoted, with
 * its slot (-1: "?", not known), separated by ", "; a key's bytes outside
 * printable ASCII, and '\', as \xNN. As snprintf: writes at most `size`
 * bytes, NUL included, and returns the whole text's length.
 */
size_t cr_redis_slots_message(char *buf, size_t size, const char *const *keys,
                              const size_t *key_lens, const int64_t *slots, size_t nkeys);

/* A refusal the deny cache keeps (a face's memory, per Redis key). */
typedef struct cr_redis_refusal {
    int64_t asked_ns;       /* the face's monotonic clock before the request was sent */
    int64_t cost;           /* the cost refused */
    int64_t remaining;      /* the reply's */
    int64_t retry_after_ns; /* the reply's, > 0 */
    int64_t reset_after_ns; /* the reply's */
} cr_redis_refusal;

/*
 * Whether the decision answering a request may be kept by the deny cache:
 * one limit, on the server's clock (`now_ns` CR_CLOCK), a peek, check or
 * allow, refused with a wait (0 < retry_after < CR_NEVER). Then fills
 * `refusal` (asked at `asked_ns`). It holds until asked_ns + retry_after: a
 * key's state only grows between resets, so Redis refuses until then too; it
 * answers for at most CR_REDIS_DENY_CACHE_MAX_NS of that.
 */
bool cr_redis_remember(cr_redis_mode mode, size_t nlimits, int64_t now_ns, int64_t cost,
                       const cr_decision *decision, int64_t asked_ns, cr_redis_refusal *refusal);

/* What a kept refusal says to a request. */
typedef enum cr_redis_recall {
    CR_REDIS_RECALLED = 0, /* it answers: *out, without asking Redis */
    CR_REDIS_ASK = 1,      /* Redis is asked; the refusal stays */
    CR_REDIS_EXPIRED = 2   /* Redis is asked; the refusal has passed: forget it */
} cr_redis_recall;

/*
 * The answer of the kept refusal of a key, under the limit it was made
 * under, to a request of that key (`mode`, `nlimits`, `now_ns` as
 * cr_redis_remember's) of `cost`, at `clock_ns` on asked_ns's clock: the
 * refusal aged to then, for its cost or a larger one it implies (gcra and
 * token_bucket: retry_after later by emission_ns per unit above it; a fixed
 * window: the same wait, its boundary); never for a smaller cost, a sliding
 * window's other cost, a cost above the burst (its answer is no wait) or a
 * request the cache does not answer (CR_REDIS_ASK).
 */
cr_redis_recall cr_redis_recall_refusal(const cr_limit *limit, const cr_redis_refusal *refusal,
                                        cr_redis_mode mode, size_t nlimits, int64_t now_ns,
                                        int64_t cost, int64_t clock_ns, cr_decision *out);

/*
 * on_error's answer while Redis cannot decide: `allow` an admission
 * (remaining 0, no wait); else a refusal whose retry_after and reset_after
 * are both the time to the next probe, `probe_in_ns`, at least
 * CR_REDIS_FIRST_BACKOFF_NS, so that its header fields agree. Returns what a
 * take of `cost` units answers: `cost` admitted, 0 refused.
 */
int64_t cr_redis_unavailable(const cr_limit *limit, bool allow, int64_t cost, int64_t probe_in_ns,
                             cr_decision *out);

/* The probe's back-off after `previous_ns` (0 or less: none yet): the first,
 * then twice the previous, at most the largest. */
int64_t cr_redis_backoff(int64_t previous_ns);

/*
 * on_error="fallback" (docs/design/redis.md, "Fallback"): while Redis cannot
 * decide, each process (or each host, through a keyed limiter in a shared
 * region) decides locally at a fallback limit, and goes back to Redis when it
 * answers, carrying what it used locally.
 *
 * CR_E_REDIS_FALLBACK_UNUSED when a fallback is given (`has_fallback`) with
 * another on_error than "fallback" (`on_error`, `len` bytes), else CR_OK.
 */
cr_status cr_redis_fallback_check(const char *on_error, size_t len, bool has_fallback);

/*
 * A Redis limit in nginx (cellrate.nginx, docs/design/nginx.md): decided
 * alone, with a client option giving each request its Redis client (a
 * connection belongs to one request); a limit kept in process or in a shared
 * region takes no client. `count`: the limits decided as one, `redis`: one of
 * them is a Redis limit, `client`: the option is given.
 *
 * CR_E_NGINX_REDIS_SEVERAL, CR_E_NGINX_CLIENT, CR_E_NGINX_CLIENT_UNUSED or
 * CR_OK.
 */
cr_status cr_redis_nginx_items(size_t count, bool redis, bool client);

/*
 * The fallback limit that is `share` of the Redis `limit` (0 < share <= 1,
 * else CR_E_REDIS_FALLBACK): the same algorithm and period, the rate times
 * share, the burst floor(burst * share) (a window: its rate, floor(rate *
 * share)), at least 1. The default share is 1: each process alone at the
 * Redis limit. A calendar quota has no fallback: CR_E_REDIS_CALENDAR_FALLBACK
 * (the faces ask this of it whatever fallback they were given).
 */
cr_status cr_redis_fallback_limit(const cr_limit *limit, double share, cr_limit *out);

/*
 * Going back to Redis with a key decided locally during an outage, whose local
 * state holds `held_remaining` units of the fallback limit (a peek of cost 0):
 * a check, an allow or a charge of `cost` is sent as a charge (`*send`) of
 * cost plus the units the local state still holds (fallback burst - held
 * remaining), so that Redis starts from what the fallback used and the way
 * back gives no fresh burst; the returned cost is the one to send, and
 * `*settled` is true: once Redis answers, the key is no longer held (its local
 * state is left to recover: a region's other processes may decide on it). A
 * take or a refund cannot carry the units (a take admits what fits, a refund
 * gives back): the returned cost is that of the charge of the units alone
 * (`*send` a charge, `*settled` true; 0: nothing to send), sent first, and the
 * take or refund then goes as it is. So does any decision that cannot carry
 * them (several limits as one, a batch's): it settles each held key first
 * with the charge a take would send. A peek writes nothing: it goes as it is
 * (`cost`, `mode`), and the key stays held (`*settled` false).
 */
int64_t cr_redis_going_back(cr_redis_mode mode, int64_t cost, const cr_limit *fallback,
                            int64_t held_remaining, cr_redis_mode *send, bool *settled);

#if defined(__GNUC__) && !defined(CR_EMBED)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif

#endif /* CELLRATE_REDIS_H */
