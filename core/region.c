/*
 * Shared regions: a file mapped MAP_SHARED that holds one limit's state for
 * every process that opens it (docs/design.md §5).
 *
 * A new region is built whole in an unnamed file (O_TMPFILE) in the target's
 * directory and published with linkat(2), which fails if the name exists:
 * racing creators cannot see or make a half-built region, exactly one wins,
 * and a creator killed at any point leaves nothing behind. Where the file
 * system has no O_TMPFILE, a short-named temporary file takes its place (a
 * creator killed before removing it leaves that file). The file's blocks are
 * reserved (fallocate) before it is mapped: a full file system is an error
 * (ENOSPC), never a SIGBUS on a first write through the mapping.
 *
 * An existing region is read with pread(2) and checked (size, magic, version,
 * checksum, kind, limit, capacity) before it is mapped. A region from another
 * boot is reset under an exclusive flock(2), which every opener holds shared
 * while it checks; flock dies with its process, so no lock is ever left held.
 * The reset clears the state, then writes the new boot id: the boot id is the
 * one publish step, outside the checksum, and a reset killed at any point
 * leaves the old (or a torn) boot id, so the next opener resets again.
 */
#include "region.h"
#include "penalty.h"
#include "cellrate/plans.h"
#include "priority.h"
#include "decide.h"
#include "seed.h"
#include "siphash.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char region_magic[8] = {'C', 'E', 'L', 'L', 'R', 'A', 'T', 'E'};

/* Opening gives up after this many rounds of "absent, then present". */
#define OPEN_TRIES 16

/* The immutable part of a header, covered by its checksum. */
typedef struct {
    char magic[8];
    uint32_t version;
    /* the store kind | the algorithm << 8 (gcra: 0, as before the catalogue)
     * | the flags << 16 (CR_REGION_PEAK; 0 in every region before it) */
    uint32_t kind;
    uint64_t total_size;
    int64_t emission_ns; /* a concurrency region's lease (0: none); rate limits: 0, see records */
    int64_t burst;       /* a concurrency region's limit; rate limits: 0 */
    int64_t capacity;
    uint32_t nbuckets;
    uint32_t nstripes;
    uint64_t seed[2];
    uint64_t priorities; /* the classes' fingerprint (cr_priorities_fingerprint), 0: none */
} region_identity;

typedef struct {
    region_identity identity;
    uint64_t checksum;
    char boot_id[48]; /* the boot the state belongs to; written last by a reset */
    _Alignas(64) _Atomic uint64_t evictions;
    _Alignas(64) cr_pair limiter_state; /* the Limiter's state and its generation */
} region_header;

/* Written only by a change: the line every decision reads. */
typedef struct {
    _Alignas(64) _Atomic uint64_t generation;
    cr_lock lock;
    uint64_t sweep_cursor;
} region_changes;

/* The limit of one generation. `generation` is written last (and
 * CR_NO_GENERATION first), so a reader that finds it equal before and after
 * reading the fields has read one generation's limit. */
#define CR_NO_GENERATION UINT64_MAX
typedef struct {
    _Atomic uint64_t generation;
    _Atomic int64_t changed_at;
    _Atomic uint64_t rate_bits;
    /* the period in seconds (a double's bits); a calendar quota's: its zone's
     * index in the region's zone table << 32 | its unit << 24 | its count */
    _Atomic uint64_t period_bits;
    _Atomic int64_t burst;
    _Atomic int64_t max_debt;    /* (the algorithm is the identity's: it never changes) */
    _Atomic int64_t emission_ns; /* checks that the fields rebuild this limit */
    _Atomic int64_t tolerance_ns;
} region_record;

/* The plans of a keyed region (docs/design/plans.md): the names given to it
 * (a name's index is a slot's plan bits; "default" at 0; a name stays while
 * the file lives), then each plan's history but the default's (whose is the
 * change line and the records above), laid out as the default's is. */
typedef struct {
    _Alignas(64) _Atomic uint32_t count; /* names, "default" included: 1 to CR_PLANS_MAX */
    char names[CR_PLANS_MAX][CR_PLAN_NAME_MAX];
} region_plans;

/* The zones a calendar region's records name (by index): a name is written
 * under the change lock before the count that shows it, and stays while the
 * file lives. */
#define CR_ZONE_NAME_MAX 256
typedef struct {
    _Alignas(64) _Atomic uint32_t count;
    char names[CR_REGION_ZONES][CR_ZONE_NAME_MAX];
} region_zones;

typedef struct {
    region_changes changes; /* its generation (the lock and the cursor are the default's) */
    region_record records[CR_REGION_RECORDS];
} region_history;

/* The layout is the file format (the tests patch these offsets). */
_Static_assert(sizeof(region_identity) == 80, "the identity is 80 bytes");
_Static_assert(offsetof(region_header, boot_id) == 88, "the boot id follows the checksum");
_Static_assert(sizeof(region_header) == 320, "the stripe locks start at offset 320");
_Static_assert(sizeof(region_changes) == 64, "the change line is one cache line");
_Static_assert(sizeof(region_record) == 64, "a record is one cache line");

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static uint64_t identity_checksum(const region_identity *identity)
{
    static const uint64_t zero_key[2] = {0, 0};
    return cr_siphash13(zero_key, identity, sizeof *identity);
}

/* This boot's id; all zeros where the system does not tell. */
static void read_boot_id(char boot_id[48])
{
    memset(boot_id, 0, 48);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (!f)
        return;
    if (!fgets(boot_id, 48, f))
        memset(boot_id, 0, 48);
    fclose(f);
}

/* A rate limit's region holds a penalty box (cr_penalty_region_size). */
static size_t penalty_size(const cr_region_spec *spec)
{
    return spec->kind == CR_REGION_CONCURRENCY ? 0 : cr_penalty_region_size(spec->capacity);
}

/* The counters' bytes: a rate limit's count by plan and class too, after the block. */
static size_t counters_size(const cr_region_spec *spec)
{
    return CR_COUNTER_BLOCK_SIZE(CR_COUNTER_LANES) +
           (spec->kind == CR_REGION_CONCURRENCY ? 0 : CR_BY_BLOCK_SIZE(CR_COUNTER_LANES));
}

static void layout(cr_region_spec *spec)
{
    spec->stripes_offset = align64(sizeof(region_header));
    spec->changes_offset = align64(spec->stripes_offset + spec->nstripes * sizeof(cr_lock));
    size_t records_end = spec->changes_offset + sizeof(region_changes) +
                         CR_REGION_RECORDS * sizeof(region_record);
    spec->zones_offset = 0;
    if (spec->algorithm == CR_ALGORITHM_CALENDAR) { /* the zones its records name */
        spec->zones_offset = align64(records_end);
        records_end = spec->zones_offset + sizeof(region_zones);
    }
    spec->plans_offset = 0;
    if (spec->kind == CR_REGION_KEYED) { /* the plans' names and histories */
        spec->plans_offset = align64(records_end);
        records_end = spec->plans_offset + align64(sizeof(region_plans)) +
                      (CR_PLANS_MAX - 1) * sizeof(region_history);
    }
    spec->counters_offset = (records_end + CR_COUNTER_SPACING - 1) &
                            ~(size_t)(CR_COUNTER_SPACING - 1);
    spec->penalty_offset = align64(spec->counters_offset + counters_size(spec));
    spec->buckets_offset = spec->penalty_offset + penalty_size(spec);
    spec->total_size = spec->buckets_offset + spec->buckets_size;
}

static region_plans *plans_of(const cr_region *region)
{
    return (region_plans *)((char *)region->base + region->plans_offset);
}

/* The change line of plan `plan` (0: the region's own, with the lock and
 * the cursor; a plan of a keyed region: its history's). */
static region_changes *changes_of(const cr_region *region, int32_t plan)
{
    if (plan == CR_PLAN_DEFAULT)
        return (region_changes *)((char *)region->base + region->changes_offset);
    region_history *histories = (region_history *)((char *)plans_of(region) +
                                                   align64(sizeof(region_plans)));
    return &histories[plan - 1].changes;
}

static region_record *record_of(const cr_region *region, int32_t plan, uint64_t generation)
{
    region_record *records = (region_record *)(changes_of(region, plan) + 1);
    return &records[generation % CR_REGION_RECORDS];
}

static region_zones *zones_at(void *base, size_t zones_offset)
{
    return (region_zones *)((char *)base + zones_offset);
}

/* The index of the zone `name` in `zones`, or -1. */
static int32_t zone_find(const region_zones *zones, const char *name)
{
    const uint32_t count = atomic_load_explicit(&zones->count, memory_order_acquire);
    for (uint32_t z = 0; z < count && z < CR_REGION_ZONES; z++)
        if (strncmp(zones->names[z], name, CR_ZONE_NAME_MAX) == 0)
            return (int32_t)z;
    return -1;
}

cr_status cr_region_room(const cr_region *region, const cr_limit *limit)
{
    if (limit->algorithm != CR_ALGORITHM_CALENDAR || !region->zones_offset)
        return CR_OK;
    const char *name = cr_zone_name(limit->zone);
    if (!name[0])
        return CR_E_TZ; /* data without a name: another process could not read it */
    const region_zones *zones = zones_at(region->base, region->zones_offset);
    if (zone_find(zones, name) >= 0)
        return CR_OK;
    return atomic_load_explicit(&zones->count, memory_order_acquire) < CR_REGION_ZONES
               ? CR_OK
               : CR_E_SHARED_ZONES;
}

/* A calendar quota's period word (the zone's index, added to the table if
 * new: the caller checked the room, under the change lock). */
static uint64_t calendar_word(region_zones *zones, const cr_limit *limit)
{
    const char *name = cr_zone_name(limit->zone);
    int32_t index = zone_find(zones, name);
    if (index < 0) {
        const uint32_t count = atomic_load_explicit(&zones->count, memory_order_relaxed);
        index = (int32_t)count;
        strncpy(zones->names[count], name, CR_ZONE_NAME_MAX - 1);
        atomic_store_explicit(&zones->count, count + 1, memory_order_release);
    }
    return (uint64_t)index << 32 | (uint64_t)limit->period.unit << 24 |
           (uint64_t)limit->period.count;
}

static uint64_t bits_of(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    return bits;
}

static double double_of(uint64_t bits)
{
    double x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

static void write_record(region_record *record, uint64_t generation, const cr_limit *limit,
                         int64_t changed_at, uint64_t period_word)
{
    atomic_store_explicit(&record->generation, CR_NO_GENERATION, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&record->changed_at, changed_at, memory_order_relaxed);
    atomic_store_explicit(&record->rate_bits, bits_of(limit->rate), memory_order_relaxed);
    atomic_store_explicit(&record->period_bits, period_word, memory_order_relaxed);
    atomic_store_explicit(&record->burst, limit->burst, memory_order_relaxed);
    atomic_store_explicit(&record->max_debt, limit->max_debt, memory_order_relaxed);
    atomic_store_explicit(&record->emission_ns, limit->emission_ns, memory_order_relaxed);
    atomic_store_explicit(&record->tolerance_ns, limit->tolerance_ns, memory_order_relaxed);
    atomic_store_explicit(&record->generation, generation, memory_order_release);
}

/* What a record of `limit` holds in its period word. */
static uint64_t period_word(const cr_region *region, const cr_limit *limit)
{
    if (limit->algorithm == CR_ALGORITHM_CALENDAR && region->zones_offset)
        return calendar_word(zones_at(region->base, region->zones_offset), limit);
    return bits_of(limit->period_s);
}

static uint64_t plan_generation(const cr_region *region, int32_t plan)
{
    return atomic_load_explicit(&changes_of(region, plan)->generation, memory_order_acquire);
}

uint64_t cr_region_generation(const cr_region *region)
{
    return plan_generation(region, CR_PLAN_DEFAULT);
}

/* A calendar record's limit as cr_limit_init takes it: its rate string
 * (into `text`) and its zone, by name: `like`'s when the same, else the
 * process's zone of that name (UTC built in). */
static cr_status calendar_args(const cr_region *region, const cr_limit *like, double rate,
                               uint64_t word, char *text, size_t size, cr_limit_args *args)
{
    const uint32_t index = (uint32_t)(word >> 32), unit = (uint32_t)(word >> 24 & 0xff);
    const cr_period period = {.unit = (cr_period_unit)unit, .count = (int32_t)(word & 0xffffff)};
    if (!region->zones_offset || index >= CR_REGION_ZONES || !cr_period_valid(period) ||
        !(rate >= 1 && rate <= (double)CR_CALENDAR_COUNT_MAX))
        return CR_E_SHARED_CORRUPT;
    const region_zones *zones = zones_at(region->base, region->zones_offset);
    if (index >= atomic_load_explicit(&zones->count, memory_order_acquire))
        return CR_E_SHARED_CORRUPT;
    const char *zone_name = zones->names[index];
    const size_t len = strnlen(zone_name, CR_ZONE_NAME_MAX);
    if (len == CR_ZONE_NAME_MAX)
        return CR_E_SHARED_CORRUPT;
    if (like->zone && strcmp(cr_zone_name(like->zone), zone_name) == 0) {
        args->zone = like->zone;
    } else if (strcmp(zone_name, "UTC") == 0) {
        args->zone = cr_zone_utc();
    } else {
        cr_status status = cr_zone_open(zone_name, len, NULL, 0, &args->zone);
        if (status != CR_OK)
            return status; /* a zone this machine's zoneinfo does not hold */
    }
    snprintf(text, size, "%.0f/%" PRId32 " %s", rate, period.count,
             cr_period_unit_name(period.unit));
    args->rate_text = text;
    args->rate_text_len = strlen(text);
    args->has_period = false;
    args->has_burst = false;
    return CR_OK;
}

cr_status cr_region_limit(const cr_region *region, int32_t plan, uint64_t generation,
                          const cr_limit *like, cr_limit *out, int64_t *changed_at)
{
    region_record *record = record_of(region, plan, generation);
    if (atomic_load_explicit(&record->generation, memory_order_acquire) != generation)
        return CR_E_SHARED_CORRUPT;
    const int64_t at = atomic_load_explicit(&record->changed_at, memory_order_relaxed);
    const double rate = double_of(atomic_load_explicit(&record->rate_bits, memory_order_relaxed));
    const uint64_t period_bits = atomic_load_explicit(&record->period_bits, memory_order_relaxed);
    const int64_t burst = atomic_load_explicit(&record->burst, memory_order_relaxed);
    const int64_t max_debt = atomic_load_explicit(&record->max_debt, memory_order_relaxed);
    const int64_t emission_ns = atomic_load_explicit(&record->emission_ns, memory_order_relaxed);
    const int64_t tolerance_ns = atomic_load_explicit(&record->tolerance_ns, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&record->generation, memory_order_relaxed) != generation)
        return CR_E_SHARED_CORRUPT; /* rewritten while read: 256 changes since */
    if (at < 0 || at >= CR_HORIZON_NS)
        return CR_E_SHARED_CORRUPT;
    const char *clock = cr_clock_name(like);
    const char *name = cr_algorithm_name(like->algorithm);
    cr_limit_args args = {
        .rate = rate,
        .period_s = double_of(period_bits),
        .has_period = true,
        .burst = burst,
        .has_burst = !cr_is_window(like), /* a window's burst is its rate */
        .clock = clock,
        .clock_len = strlen(clock),
        .algorithm = name,
        .algorithm_len = strlen(name),
        .max_debt = max_debt,
        .has_max_debt = true,
    };
    char text[64];
    if (like->algorithm == CR_ALGORITHM_CALENDAR) {
        cr_status status = calendar_args(region, like, rate, period_bits, text, sizeof text, &args);
        if (status != CR_OK)
            return status;
    }
    cr_limit limit;
    if (cr_limit_init(&limit, &args) != CR_OK || limit.emission_ns != emission_ns ||
        limit.tolerance_ns != tolerance_ns)
        return CR_E_SHARED_CORRUPT;   /* not a limit this version writes */
    cr_priorities_keep(&limit, like); /* the region's: every opener's are the same */
    *out = limit;
    *changed_at = at;
    return CR_OK;
}

uint64_t cr_region_publish(cr_region *region, int32_t plan, const cr_limit *limit,
                           int64_t changed_at)
{
    region_changes *changes = changes_of(region, plan);
    const uint64_t next = atomic_load_explicit(&changes->generation, memory_order_relaxed) + 1;
    write_record(record_of(region, plan, next), next, limit, changed_at,
                 period_word(region, limit));
    atomic_store_explicit(&changes->generation, next, memory_order_release);
    return next;
}

cr_lock *cr_region_change_lock(cr_region *region)
{
    return region->base ? &changes_of(region, CR_PLAN_DEFAULT)->lock : NULL;
}

const _Atomic uint64_t *cr_region_generation_word(const cr_region *region, int32_t plan)
{
    return &changes_of(region, plan)->generation;
}

cr_status cr_region_adopt(const cr_region *region, int32_t plan, const cr_generation *current,
                          cr_generation *next)
{
    /* A record is rewritten only after CR_REGION_RECORDS changes: a read
     * that meets one keeps up after a few tries, or the region is damaged. */
    for (int tries = 0; tries < 8; tries++) {
        const uint64_t generation = plan_generation(region, plan);
        next->generation = generation;
        if (generation == current->generation)
            return CR_OK;
        if (cr_region_limit(region, plan, generation, &current->limit, &next->limit,
                            &next->changed_at) == CR_OK) {
            next->limit.fast_clock = current->limit.fast_clock;
            next->older = current;
            return CR_OK;
        }
    }
    return CR_E_SHARED_CORRUPT;
}

/* Why an opener whose limit is `mine` is refused a region holding `theirs`
 * (on_change='refuse'; a window's burst is its rate). */
static cr_status refusal(const cr_limit *theirs, const cr_limit *mine)
{
    if (theirs->zone != mine->zone || theirs->period.unit != mine->period.unit ||
        theirs->period.count != mine->period.count)
        return CR_E_SHARED_ZONE; /* another calendar */
    if (theirs->emission_ns == mine->emission_ns && theirs->tolerance_ns == mine->tolerance_ns &&
        theirs->burst == mine->burst)
        return CR_E_SHARED_MAX_DEBT;
    return cr_is_window(mine) || theirs->emission_ns != mine->emission_ns ? CR_E_SHARED_RATE
                                                                          : CR_E_SHARED_BURST;
}

cr_status cr_region_join(cr_region *region, const cr_limit *limit, cr_on_change on_change,
                         int64_t now_ns, cr_generation *current, cr_limit *replaced, bool *changed)
{
    const uint64_t generation = cr_region_generation(region);
    cr_limit theirs;
    int64_t changed_at;
    cr_status status = cr_region_limit(region, CR_PLAN_DEFAULT, generation, limit, &theirs,
                                       &changed_at);
    if (status != CR_OK)
        return status;
    *changed = !cr_limit_same(&theirs, limit); /* the same decisions: each keeps its words */
    current->limit = *limit;
    current->older = NULL;
    if (!*changed) {
        current->generation = generation;
        current->changed_at = changed_at;
        return CR_OK;
    }
    if (on_change == CR_CHANGE_REFUSE)
        return refusal(&theirs, limit);
    if ((status = cr_region_room(region, limit)) != CR_OK)
        return status;
    *replaced = theirs;
    current->changed_at = now_ns;
    current->generation = cr_region_publish(region, CR_PLAN_DEFAULT, limit, now_ns);
    return CR_OK;
}

int32_t cr_region_plan_count(const cr_region *region)
{
    if (!region->plans_offset)
        return 1;
    const uint32_t count = atomic_load_explicit(&plans_of(region)->count, memory_order_acquire);
    return count >= 1 && count <= CR_PLANS_MAX ? (int32_t)count : 1; /* else damaged: default */
}

const char *cr_region_plan_name(const cr_region *region, int32_t plan)
{
    return plans_of(region)->names[plan];
}

/* The region's index of the plan `name`, or -1. */
static int32_t region_plan_find(const cr_region *region, int32_t count, const char *name)
{
    for (int32_t r = 1; r < count; r++)
        if (strncmp(plans_of(region)->names[r], name, CR_PLAN_NAME_MAX) == 0)
            return r;
    return -1;
}

/* Whether the zones of the plans of `table` fit the region's table
 * together. */
static cr_status zones_room(const cr_region *region, const cr_plan_table *table)
{
    if (!region->zones_offset)
        return CR_OK;
    const region_zones *zones = zones_at(region->base, region->zones_offset);
    uint32_t count = atomic_load_explicit(&zones->count, memory_order_acquire);
    for (int32_t p = 1; p < table->count; p++) {
        const char *name = cr_zone_name(table->limits[p].zone);
        if (!name[0])
            return CR_E_TZ;
        bool known = zone_find(zones, name) >= 0;
        for (int32_t q = 1; q < p && !known; q++)
            known = strcmp(cr_zone_name(table->limits[q].zone), name) == 0;
        if (!known && ++count > CR_REGION_ZONES)
            return CR_E_SHARED_ZONES;
    }
    return CR_OK;
}

cr_status cr_region_join_plans(cr_region *region, const cr_plan_table *table,
                               cr_on_change on_change, int64_t now_ns, uint32_t *changed)
{
    *changed = 0;
    if (!table || table->count <= 1)
        return CR_OK;
    const int32_t count = cr_region_plan_count(region);
    int32_t adding = 0;
    /* every check first: a refused opening writes nothing */
    for (int32_t p = 1; p < table->count; p++) {
        const int32_t r = region_plan_find(region, count, table->names[p]);
        if (r < 0) {
            adding++;
            continue;
        }
        cr_limit theirs;
        int64_t changed_at;
        cr_status status = cr_region_limit(region, r, plan_generation(region, r), &table->limits[p],
                                           &theirs, &changed_at);
        if (status != CR_OK)
            return status;
        if (!cr_limit_same(&theirs, &table->limits[p]) && on_change == CR_CHANGE_REFUSE)
            return refusal(&theirs, &table->limits[p]);
    }
    cr_status room = zones_room(region, table);
    if (room != CR_OK)
        return room;
    if (count + adding > CR_PLANS_MAX)
        return CR_E_SHARED_PLANS;
    region_plans *plans = plans_of(region);
    int32_t next = count;
    for (int32_t p = 1; p < table->count; p++) {
        const cr_limit *mine = &table->limits[p];
        int32_t r = region_plan_find(region, count, table->names[p]);
        if (r < 0) { /* a name new to the region: its first generation */
            r = next++;
            memcpy(plans->names[r], table->names[p], CR_PLAN_NAME_MAX);
            write_record(record_of(region, r, 0), 0, mine, 0, period_word(region, mine));
            continue;
        }
        cr_limit theirs;
        int64_t changed_at;
        if (cr_region_limit(region, r, plan_generation(region, r), mine, &theirs, &changed_at) ==
                CR_OK &&
            !cr_limit_same(&theirs, mine)) {
            cr_region_publish(region, r, mine, now_ns); /* the newest opener's plan */
            *changed |= UINT32_C(1) << r;
        }
    }
    atomic_store_explicit(&plans->count, (uint32_t)next, memory_order_release);
    return CR_OK;
}

uint64_t *cr_region_sweep_cursor(cr_region *region)
{
    return &changes_of(region, CR_PLAN_DEFAULT)->sweep_cursor;
}

int64_t cr_carry_since(const cr_region *region, int32_t plan, const cr_generation *current,
                       uint64_t since, int64_t state, int64_t now_ns)
{
    if (state == 0)
        return 0; /* idle under every limit */
    if (since > current->generation || current->generation - since >= CR_REGION_RECORDS)
        return cr_full(&current->limit, now_ns);
    const uint64_t steps = current->generation - since;
    /* The chain of this process, when it has every generation since: one
     * walk down, the carries on the way back up. */
    const cr_generation *path[CR_REGION_RECORDS];
    const cr_generation *known = current;
    uint64_t n = 0;
    while (known && n <= steps && known->generation == current->generation - n) {
        path[n++] = known;
        known = known->older;
    }
    if (n == steps + 1) {
        for (uint64_t i = steps; i-- > 0;)
            state = cr_carry(&path[i + 1]->limit, &path[i]->limit, state, path[i]->changed_at);
        return state;
    }
    /* Else (changes another process made) the region's records. */
    cr_limit from, to;
    int64_t changed_at;
    if (!region ||
        cr_region_limit(region, plan, since, &current->limit, &from, &changed_at) != CR_OK)
        return cr_full(&current->limit, now_ns);
    for (uint64_t g = since + 1; g <= current->generation; g++) {
        if (cr_region_limit(region, plan, g, &current->limit, &to, &changed_at) != CR_OK)
            return cr_full(&current->limit, now_ns);
        state = cr_carry(&from, &to, state, changed_at);
        from = to;
    }
    return state;
}

static cr_status io_status(void)
{
    return (errno == EACCES || errno == EPERM || errno == EROFS) ? CR_E_SHARED_ACCESS
                                                                 : CR_E_SHARED_IO;
}

static void bind_region(cr_region *region, void *base, const cr_region_spec *spec)
{
    region_header *header = base;
    region->base = base;
    region->size = spec->total_size;
    region->stripes = (cr_lock *)((char *)base + spec->stripes_offset);
    region->buckets = (char *)base + spec->buckets_offset;
    region->changes_offset = spec->changes_offset;
    region->plans_offset = spec->plans_offset;
    region->zones_offset = spec->zones_offset;
    region->evictions = &header->evictions;
    region->limiter_state = &header->limiter_state;
    region->counters = (cr_counter_block *)((char *)base + spec->counters_offset);
    region->by = spec->kind == CR_REGION_CONCURRENCY
                     ? NULL
                     : (cr_by_block *)((char *)region->counters +
                                       CR_COUNTER_BLOCK_SIZE(CR_COUNTER_LANES));
    region->penalty = penalty_size(spec) ? (char *)base + spec->penalty_offset : NULL;
    memcpy(region->seed, header->identity.seed, sizeof region->seed);
}

/* The directory part of `path` ("." when it has none), malloc'd. */
static char *directory_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    char *dir = malloc(len + 1);
    if (dir) {
        memcpy(dir, path, len);
        dir[len] = '\0';
    }
    return dir;
}

/* A new file for a region being built: unnamed where the file system can,
 * else a short hidden name (*temp, malloc'd) that the caller removes. The
 * short name keeps names of up to NAME_MAX characters creatable. */
static int open_building(const char *path, mode_t mode, char **temp)
{
    *temp = NULL;
    char *dir = directory_of(path);
    if (!dir)
        return errno = ENOMEM, -1;
    /* An unnamed file is published through AT_EMPTY_PATH (which needs a
     * capability) or /proc/self/fd: without /proc, only a name will do. */
    int fd = -1;
    if (access("/proc/self/fd", F_OK) == 0)
        fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
    else
        errno = EOPNOTSUPP;
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
        size_t len = strlen(dir);
        *temp = malloc(len + sizeof "/.cellrate-XXXXXX");
        if (*temp) {
            memcpy(*temp, dir, len);
            memcpy(*temp + len, "/.cellrate-XXXXXX", sizeof "/.cellrate-XXXXXX");
            fd = mkostemp(*temp, O_CLOEXEC);
        } else {
            errno = ENOMEM;
        }
        if (fd < 0) {
            free(*temp);
            *temp = NULL;
        }
    }
    free(dir);
    return fd;
}

/* Gives the built file its name; fails with EEXIST when the name is taken. */
static int publish(int fd, const char *temp, const char *path)
{
    if (temp)
        return link(temp, path);
    if (linkat(fd, "", AT_FDCWD, path, AT_EMPTY_PATH) == 0)
        return 0;
    if (errno != ENOENT && errno != EPERM)
        return -1;
    /* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; /proc gives the same link. */
    char proc_path[40];
    snprintf(proc_path, sizeof proc_path, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, proc_path, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
}

/* Builds a region in a file of its own and links it in at `path`; *lost when
 * another process linked its own first. The file is all zeros after
 * posix_fallocate, which is what a free lock, a zero TAT and an empty slot
 * are: only the header is written. */
static cr_status create_region(const char *path, int64_t mode, const cr_region_spec *spec,
                               const cr_limit *limit, cr_region *region, bool *lost)
{
    *lost = false;
    char *temp;
    int fd = open_building(path, (mode_t)mode, &temp);
    if (fd < 0)
        return io_status();
    void *base = MAP_FAILED;
    cr_status status = CR_OK;
    int err;
    if (fchmod(fd, (mode_t)mode) != 0) {
        status = io_status();
    } else if ((err = posix_fallocate(fd, 0, (off_t)spec->total_size)) != 0) {
        errno = err;
        status = io_status();
    } else if ((base = mmap(NULL, spec->total_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) ==
               MAP_FAILED) {
        status = io_status();
    } else {
        region_header *header = base;
        region_identity *identity = &header->identity;
        memcpy(identity->magic, region_magic, sizeof region_magic);
        identity->version = CR_REGION_VERSION;
        identity->kind = spec->kind | spec->algorithm << 8 | spec->flags << 16;
        identity->total_size = spec->total_size;
        identity->emission_ns = spec->emission_ns;
        identity->burst = spec->burst;
        identity->capacity = spec->capacity;
        identity->priorities = spec->priorities;
        identity->nbuckets = spec->nbuckets;
        identity->nstripes = spec->nstripes;
        if (cr_random_seed(identity->seed) != CR_OK)
            status = CR_E_NOMEM;
        read_boot_id(header->boot_id);
        header->checksum = identity_checksum(identity);
        region_changes *changes = (region_changes *)((char *)base + spec->changes_offset);
        const cr_region built = {.base = base, .zones_offset = spec->zones_offset};
        if (status == CR_OK && limit && (status = cr_region_room(&built, limit)) == CR_OK)
            write_record((region_record *)(changes + 1), 0, limit, 0, period_word(&built, limit));
        if (spec->plans_offset) { /* a keyed table's plans: "default" alone */
            region_plans *plans = (region_plans *)((char *)base + spec->plans_offset);
            memcpy(plans->names[CR_PLAN_DEFAULT], "default", sizeof "default");
            atomic_store_explicit(&plans->count, 1, memory_order_relaxed);
        }
        if (status == CR_OK && publish(fd, temp, path) != 0) {
            *lost = errno == EEXIST;
            status = io_status();
        }
    }
    int saved_errno = errno;
    if (temp)
        unlink(temp);
    close(fd);
    free(temp);
    if (status == CR_OK) {
        bind_region(region, base, spec);
        return CR_OK;
    }
    if (base != MAP_FAILED)
        munmap(base, spec->total_size);
    errno = saved_errno;
    return status;
}

/* Checks an existing region's header against what the caller wants, and
 * reads the boot id it belongs to. */
static cr_status check_identity(int fd, const cr_region_spec *spec, char boot_id[48])
{
    region_identity identity;
    uint64_t checksum;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return io_status();
    if ((uint64_t)st.st_size < sizeof(region_header))
        return CR_E_SHARED_SHORT;
    if (pread(fd, &identity, sizeof identity, 0) != (ssize_t)sizeof identity ||
        pread(fd, &checksum, sizeof checksum, offsetof(region_header, checksum)) !=
            (ssize_t)sizeof checksum ||
        pread(fd, boot_id, 48, offsetof(region_header, boot_id)) != 48)
        return io_status();
    if (memcmp(identity.magic, region_magic, sizeof region_magic) != 0)
        return CR_E_SHARED_FOREIGN;
    if (identity.version != CR_REGION_VERSION)
        return CR_E_SHARED_VERSION;
    if (checksum != identity_checksum(&identity))
        return CR_E_SHARED_CORRUPT;
    if (identity.total_size != (uint64_t)st.st_size)
        return (uint64_t)st.st_size < identity.total_size ? CR_E_SHARED_SHORT : CR_E_SHARED_CORRUPT;
    if ((identity.kind & 0xff) != spec->kind)
        return CR_E_SHARED_KIND;
    if ((identity.kind >> 8 & 0xff) != spec->algorithm)
        return CR_E_SHARED_ALGORITHM;
    if (identity.emission_ns != spec->emission_ns || identity.burst != spec->burst ||
        identity.kind >> 16 != spec->flags)
        return CR_E_SHARED_LIMIT; /* a concurrency region's lease, limit and peak */
    if (identity.capacity != spec->capacity)
        return CR_E_SHARED_CAPACITY;
    if (identity.priorities != spec->priorities)
        return CR_E_SHARED_PRIORITIES;
    if (identity.nbuckets != spec->nbuckets || identity.nstripes != spec->nstripes ||
        identity.total_size != spec->total_size)
        return CR_E_SHARED_CORRUPT;
    return CR_OK;
}

/* Backs every page of an existing region with blocks, so that no write
 * through the mapping can meet a hole on a full file system (a file copied
 * sparse, or made by hand). fallocate(2) only: glibc's emulation writes
 * bytes, which would race with the processes using the region. */
static cr_status reserve_existing(int fd, size_t size)
{
    if (fallocate(fd, 0, 0, (off_t)size) == 0 || errno == EOPNOTSUPP || errno == ENOSYS)
        return CR_OK;
    return io_status();
}

static cr_status open_existing(int fd, const cr_region_spec *spec, cr_region *region)
{
    char boot_id[48], region_boot_id[48];
    read_boot_id(boot_id);

    if (flock(fd, LOCK_SH) != 0)
        return io_status();
    cr_status status = check_identity(fd, spec, region_boot_id);
    bool stale = status == CR_OK && memcmp(region_boot_id, boot_id, sizeof boot_id) != 0;
    if (stale) { /* made before a reboot: reset it, once, under the exclusive lock */
        flock(fd, LOCK_EX);
        status = check_identity(fd, spec, region_boot_id);
        stale = status == CR_OK && memcmp(region_boot_id, boot_id, sizeof boot_id) != 0;
    }
    if (status == CR_OK)
        status = reserve_existing(fd, spec->total_size);
    void *base = MAP_FAILED;
    if (status == CR_OK) {
        base = mmap(NULL, spec->total_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED)
            status = io_status();
    }
    if (status == CR_OK && stale) {
        region_header *header = base;
        /* A calendar quota's states are wall time (a period's end and its
         * count): they stay, as do the keys' slots. Every other state is on
         * the old boot's clocks. The locks are the old boot's processes'. */
        const bool wall = spec->algorithm == CR_ALGORITHM_CALENDAR;
        const uint64_t generation = atomic_load(
            &((region_changes *)((char *)base + spec->changes_offset))->generation);
        if (!wall)
            header->limiter_state = cr_pair_make(generation, 0);
        atomic_store(&((region_changes *)((char *)base + spec->changes_offset))->lock, 0);
        memset((char *)base + spec->stripes_offset, 0, spec->nstripes * sizeof(cr_lock));
        if (!wall) {
            atomic_store(&header->evictions, 0);
            memset((char *)base + spec->buckets_offset, 0, spec->buckets_size);
        }
        memset((char *)base + spec->counters_offset, 0, counters_size(spec));
        if (penalty_size(spec)) /* its times are the old boot's; its penalty stays */
            cr_penalty_region_reset((char *)base + spec->penalty_offset, spec->capacity);
        /* The publish step: the state above is complete before the id says so.
         * Only a kill can observe the order (openers wait on the flock), and
         * a kill sees program order: a compiler barrier is all it takes. */
        atomic_signal_fence(memory_order_seq_cst);
        memcpy(header->boot_id, boot_id, sizeof boot_id);
    }
    int saved_errno = errno;
    flock(fd, LOCK_UN);
    if (status != CR_OK) {
        if (base != MAP_FAILED)
            munmap(base, spec->total_size);
        errno = saved_errno;
        return status;
    }
    bind_region(region, base, spec);
    return CR_OK;
}

cr_status cr_region_open(cr_region *region, cr_region_spec *spec, const cr_limit *limit,
                         const char *path, int64_t mode)
{
    if (mode < 0 || mode > CR_SHARED_MAX_MODE)
        return CR_E_SHARED_MODE;
    /* a rate limit's is in the records; a store without one (NULL:
     * concurrency) fills in the spec itself */
    if (limit) {
        spec->algorithm = limit->algorithm;
        spec->priorities = cr_priorities_fingerprint(limit);
    }
    layout(spec);
    /* Each round either opens the file or finds it absent and creates it; a
     * round ends in another only when a racing process linked first, or
     * removed the file between our open and our link. */
    for (int round = 0; round < OPEN_TRIES; round++) {
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd >= 0) {
            cr_status status = open_existing(fd, spec, region);
            int saved_errno = errno;
            close(fd);
            errno = saved_errno;
            return status;
        }
        if (errno != ENOENT)
            return io_status();
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
            return CR_E_SHARED_DANGLING; /* link(2) would never replace it */
        bool lost;
        cr_status status = create_region(path, mode, spec, limit, region, &lost);
        if (!lost)
            return status;
        /* another process published the region first: open theirs */
    }
    return CR_E_SHARED_UNSTABLE;
}

void cr_region_close(cr_region *region)
{
    if (region->base && region->sync_ns)
        msync(region->base, region->size, MS_SYNC);
    if (region->base)
        munmap(region->base, region->size);
    region->base = NULL;
}

static int64_t coarse_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

cr_status cr_region_set_sync(cr_region *region, double seconds)
{
    int64_t ns;
    if (!(seconds > 0) || cr_seconds_to_ns(seconds, &ns) != CR_OK)
        return CR_E_SYNC;
    if (!region->base)
        return CR_E_SYNC_SHARED;
    region->sync_ns = ns > 0 ? ns : 1;
    atomic_store_explicit(&region->synced_at, coarse_now(), memory_order_relaxed);
    return CR_OK;
}

void cr_region_sync_due(cr_region *region)
{
    const int64_t now = coarse_now();
    int64_t last = atomic_load_explicit(&region->synced_at, memory_order_relaxed);
    if (now - last < region->sync_ns)
        return;
    /* one thread of the process writes the region out; the others go on */
    if (atomic_compare_exchange_strong_explicit(&region->synced_at, &last, now,
                                                memory_order_relaxed, memory_order_relaxed))
        msync(region->base, region->size, MS_SYNC);
}

/* ------------------------------------------------------------------------ */
/* A look: a region mapped read-only (cr_inspect_region, core/inspect.c).   */

/* The identity of the file open on `fd`, checked as an opening checks it
 * (without what an opener wants); what it says, and the layout it implies,
 * into *spec. */
static cr_status look_identity(int fd, cr_region_spec *spec, char boot_id[48])
{
    region_identity identity;
    struct stat st;
    uint64_t checksum;
    if (fstat(fd, &st) != 0)
        return io_status();
    if (!S_ISREG(st.st_mode))
        return CR_E_SHARED_FOREIGN;
    if ((uint64_t)st.st_size < sizeof(region_header))
        return CR_E_SHARED_SHORT;
    if (pread(fd, &identity, sizeof identity, 0) != (ssize_t)sizeof identity)
        return io_status();
    if (memcmp(identity.magic, region_magic, sizeof region_magic) != 0)
        return CR_E_SHARED_FOREIGN;
    if (identity.version != CR_REGION_VERSION)
        return CR_E_SHARED_VERSION;
    if (pread(fd, &checksum, sizeof checksum, offsetof(region_header, checksum)) !=
            (ssize_t)sizeof checksum ||
        pread(fd, boot_id, 48, offsetof(region_header, boot_id)) != 48)
        return io_status();
    if (checksum != identity_checksum(&identity))
        return CR_E_SHARED_CORRUPT;
    if (identity.total_size != (uint64_t)st.st_size)
        return (uint64_t)st.st_size < identity.total_size ? CR_E_SHARED_SHORT : CR_E_SHARED_CORRUPT;
    const uint32_t kind = identity.kind & 0xff;
    const uint32_t algorithm = identity.kind >> 8 & 0xff, flags = identity.kind >> 16;
    if (kind < CR_REGION_LIMITER || kind > CR_REGION_CONCURRENCY ||
        (kind == CR_REGION_CONCURRENCY && (algorithm != 0 || (flags & ~CR_REGION_PEAK) != 0)) ||
        (kind != CR_REGION_CONCURRENCY && (cr_algorithm_name(algorithm)[0] == '\0' || flags != 0)))
        return CR_E_SHARED_CORRUPT;
    *spec = (cr_region_spec){
        .kind = kind,
        .algorithm = algorithm,
        .flags = flags,
        .emission_ns = identity.emission_ns,
        .burst = identity.burst,
        .capacity = identity.capacity,
        .priorities = identity.priorities,
        .nbuckets = identity.nbuckets,
        .nstripes = identity.nstripes,
    };
    layout(spec);
    if (spec->buckets_offset > identity.total_size)
        return CR_E_SHARED_CORRUPT;
    spec->total_size = identity.total_size;
    spec->buckets_size = identity.total_size - spec->buckets_offset;
    return CR_OK;
}

cr_status cr_region_look(cr_region *region, cr_region_spec *spec, const char *path, bool *this_boot)
{
    /* O_NONBLOCK: a FIFO at the path must not hang the look */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        struct stat st;
        if (errno != ENOENT)
            return io_status();
        if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
            return CR_E_SHARED_DANGLING;
        return CR_E_SHARED_MISSING;
    }
    char boot_id[48], this_boot_id[48];
    cr_status status = look_identity(fd, spec, boot_id);
    void *base = MAP_FAILED;
    if (status == CR_OK &&
        (base = mmap(NULL, spec->total_size, PROT_READ, MAP_SHARED, fd, 0)) == MAP_FAILED)
        status = io_status();
    int saved_errno = errno;
    close(fd);
    if (status != CR_OK) {
        errno = saved_errno;
        return status;
    }
    read_boot_id(this_boot_id);
    *this_boot = memcmp(boot_id, this_boot_id, sizeof boot_id) == 0;
    bind_region(region, base, spec);
    return CR_OK;
}
