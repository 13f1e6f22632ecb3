/*
 * Inspecting a region (cr_inspect_region; docs/design/shared-regions.md,
 * "Inspecting"): what a region file holds, read without changing it. It sits
 * above the stores: the region maps the file read-only (cr_region_look), and
 * each store counts what its own table holds (cr_keyed_count_slots,
 * cr_gauge_count), as the counters read their block.
 */
#include "carry.h"
#include "cellrate/clock.h"
#include "cellrate/inspect.h"
#include "gauge.h"
#include "keyed.h"
#include "penalty.h"
#include "region.h"

#include <stdatomic.h>
#include <string.h>

static const char *kind_name(uint32_t kind)
{
    switch (kind) {
    case CR_REGION_LIMITER:
        return "limiter";
    case CR_REGION_KEYED:
        return "keyed";
    case CR_REGION_CONCURRENCY:
        return "concurrency";
    default:
        return NULL;
    }
}

/* The clock a region's bans are on: its algorithm's (the windows' is the
 * realtime clock). */
static int64_t box_now(const cr_region_spec *spec)
{
    return spec->algorithm >= CR_ALGORITHM_FIXED_WINDOW ? cr_realtime_ns() : cr_clock_ns();
}

/* Maps the region at `path` read-only for a look (cr_region_look): how every
 * inspection opens it; the caller closes it (cr_region_close) when CR_OK. */
static cr_status look(const char *path, cr_region *region, cr_region_spec *spec, bool *this_boot)
{
    *region = (cr_region){0};
    if (!path)
        return CR_E_SHARED_PATH;
    return cr_region_look(region, spec, path, this_boot);
}

/* The limit a region's records are read as: a region has no clock (its
 * processes may mix them), so the default's. */
static cr_limit like_of(const cr_region_spec *spec)
{
    const cr_algorithm algorithm = (cr_algorithm)spec->algorithm;
    return (cr_limit){
        .algorithm = algorithm, .burst = 1, .fast_clock = algorithm < CR_ALGORITHM_FIXED_WINDOW};
}

/* Plan `plan`'s limit now in *limit, its generation in *generation (a
 * change meanwhile: read again). */
static cr_status plan_now(const cr_region *region, const cr_region_spec *spec, int32_t plan,
                          cr_limit *limit, uint64_t *generation, int64_t *changed_at)
{
    const cr_limit like = like_of(spec);
    cr_status status = CR_E_SHARED_CORRUPT;
    for (int tries = 0; tries < 8 && status != CR_OK; tries++) {
        *generation = atomic_load(cr_region_generation_word(region, plan));
        status = cr_region_limit(region, plan, *generation, &like, limit, changed_at);
    }
    return status;
}

/* A keyed region's plan table into out->plans. */
static cr_status inspect_plans(const cr_region *region, const cr_region_spec *spec,
                               cr_region_info *out)
{
    out->plan_count = cr_region_plan_count(region);
    for (int32_t p = 0; p < out->plan_count; p++) {
        uint64_t generation;
        int64_t changed_at;
        cr_status status = plan_now(region, spec, p, &out->plans[p].limit, &generation,
                                    &changed_at);
        if (status != CR_OK)
            return status;
        const char *name = p == CR_PLAN_DEFAULT ? "default" : cr_region_plan_name(region, p);
        strncpy(out->plans[p].name, name, CR_PLAN_NAME_MAX - 1);
    }
    return CR_OK;
}

/* What the checked region `region`, mapped as `spec` says, holds. */
static cr_status inspect_mapped(const cr_region *region, const cr_region_spec *spec,
                                cr_region_info *out)
{
    out->generation = cr_region_generation(region);
    if (spec->kind == CR_REGION_CONCURRENCY) {
        out->max_in_flight = spec->burst;
        out->lease_ns = spec->emission_ns;
        out->capacity = spec->capacity;
        if (spec->burst < 1 || spec->burst > CR_GAUGE_MAX_LIMIT ||
            (spec->capacity > 0 &&
             spec->buckets_size < (size_t)spec->nbuckets * 4 * 16 * (size_t)(spec->burst + 1)))
            return CR_E_SHARED_CORRUPT;
        const bool peak = spec->flags & CR_REGION_PEAK;
        uint64_t held;
        cr_gauge_count(region->buckets, spec->nbuckets, spec->burst, spec->capacity > 0,
                       &out->live_keys, &held);
        cr_gauge_describe(out->description, sizeof out->description, spec->burst, spec->capacity,
                          spec->emission_ns, peak);
        cr_counters_gauge_stats(region->counters, CR_COUNTER_LANES, held, peak, &out->gauge_stats);
        return CR_OK;
    }
    const cr_algorithm algorithm = (cr_algorithm)spec->algorithm;
    const bool keyed = spec->kind == CR_REGION_KEYED;
    out->algorithm = cr_algorithm_name(algorithm);
    out->capacity = keyed ? spec->capacity : 0;
    if (keyed) {
        if (spec->buckets_size < (size_t)spec->nbuckets * 64)
            return CR_E_SHARED_CORRUPT;
        out->live_keys = cr_keyed_count_slots(region->buckets, spec->nbuckets);
    }
    int64_t changed_at;
    cr_status status = plan_now(region, spec, CR_PLAN_DEFAULT, &out->limit, &out->generation,
                                &changed_at);
    if (status == CR_OK && keyed)
        status = inspect_plans(region, spec, out);
    if (status != CR_OK)
        return status;
    cr_limit_describe(out->description, sizeof out->description,
                      keyed ? "cellrate.KeyedLimiter" : "cellrate.Limiter", &out->limit,
                      keyed ? spec->capacity : -1);
    cr_counters_rate_stats(region->counters, CR_COUNTER_LANES,
                           keyed ? atomic_load(region->evictions) : 0, &out->stats);
    out->banned = cr_penalty_region_list(region->penalty, spec->capacity, box_now(spec), NULL, 0,
                                         &out->has_penalty, &out->penalty, &out->stats.bans);
    return CR_OK;
}

cr_status cr_inspect_region(const char *path, cr_region_info *out)
{
    memset(out, 0, sizeof *out);
    out->plan_count = 1;
    cr_region region;
    cr_region_spec spec;
    bool this_boot;
    cr_status status = look(path, &region, &spec, &this_boot);
    if (status != CR_OK)
        return status;
    out->layout_version = CR_REGION_VERSION;
    out->kind = kind_name(spec.kind);
    out->size = spec.total_size;
    out->this_boot = this_boot;
    status = inspect_mapped(&region, &spec, out);
    cr_region_close(&region);
    return status;
}

cr_status cr_inspect_box(const char *path, cr_penalty_entry *entries, size_t max_entries,
                         size_t *count)
{
    *count = 0;
    cr_region region;
    cr_region_spec spec;
    bool this_boot;
    cr_status status = look(path, &region, &spec, &this_boot);
    if (status != CR_OK)
        return status;
    if (region.penalty) {
        bool has_penalty;
        cr_penalty penalty;
        uint64_t bans;
        *count = cr_penalty_region_list(region.penalty, spec.capacity, box_now(&spec), entries,
                                        max_entries, &has_penalty, &penalty, &bans);
    }
    cr_region_close(&region);
    return CR_OK;
}

/* What `key` (a slot's plan, tag and state) holds under its plan now. */
static cr_status inspect_slot(const cr_region *region, const cr_region_spec *spec, int32_t plan,
                              uint64_t tag, int64_t state, cr_key_info *out)
{
    if (plan >= cr_region_plan_count(region))
        return CR_E_SHARED_CORRUPT; /* a plan the region never named */
    cr_generation current = {0};
    cr_status status = plan_now(region, spec, plan, &current.limit, &current.generation,
                                &current.changed_at);
    if (status != CR_OK)
        return status;
    const int64_t now = box_now(spec);
    /* carried as the key's next decision under its plan carries it (keyed.c) */
    const uint64_t behind = (current.generation - tag) % 256;
    state = behind >= CR_KEYED_MAX_BEHIND || behind > current.generation
                ? cr_full(&current.limit, now)
                : cr_carry_since(region, plan, &current, current.generation - behind, state, now);
    cr_decision decision;
    cr_decide(&current.limit, state, now, 0, &decision);
    out->found = true;
    out->plan = plan;
    strncpy(out->plan_name, plan == CR_PLAN_DEFAULT ? "default" : cr_region_plan_name(region, plan),
            CR_PLAN_NAME_MAX - 1);
    out->limit = current.limit;
    out->remaining = decision.remaining;
    out->used = decision.limit - decision.remaining;
    out->reset_after_ns = decision.reset_after_ns;
    return CR_OK;
}

cr_status cr_inspect_key(const char *path, const void *key, size_t key_len, cr_key_info *out)
{
    memset(out, 0, sizeof *out);
    cr_region region;
    cr_region_spec spec;
    bool this_boot;
    cr_status status = look(path, &region, &spec, &this_boot);
    if (status != CR_OK)
        return status;
    int32_t plan;
    uint64_t tag;
    int64_t state;
    if (spec.kind != CR_REGION_KEYED)
        status = CR_E_INSPECT_KEY;
    else if (spec.buckets_size < (size_t)spec.nbuckets * 64)
        status = CR_E_SHARED_CORRUPT;
    else if (cr_keyed_look_key(region.buckets, spec.nbuckets, region.seed, key, key_len, &plan,
                               &tag, &state))
        status = inspect_slot(&region, &spec, plan, tag, state, out);
    cr_region_close(&region);
    return status;
}
