/* A process's waiters in line, per key (core/line.c; docs/design.md §9):
 * each key's tail, the instant from which its next waiter takes its turn,
 * changed by `apply` under the table's lock. A slot whose tail has passed is
 * free; cr_lines_apply is false (nothing done) when none is. Not part of the
 * public API. */
#ifndef CELLRATE_LINE_H
#define CELLRATE_LINE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct cr_lines cr_lines;
typedef int64_t (*cr_line_apply)(int64_t tail, void *context);
cr_lines *cr_lines_new(uint32_t count);
void cr_lines_free(cr_lines *lines);
bool cr_lines_apply(cr_lines *lines, uint64_t fingerprint, int64_t now_ns, cr_line_apply apply,
                    void *context);
/* The latest tail any line of the table has had (lock-free): no line holds
 * a waiter once it has passed. */
int64_t cr_lines_latest(const cr_lines *lines);

#endif
