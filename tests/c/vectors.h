/* Reading the vector files (tests/vectors/, written by the reference model):
 * one place for opening a file, skipping blank lines and comments, and the
 * %XX encoding of strings. */
#ifndef CELLRATE_TEST_VECTORS_H
#define CELLRATE_TEST_VECTORS_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Opens dir/name or exits 2 naming it: a vector file that cannot be read is
 * an error of the run, never a pass. */
static inline FILE *vectors_open(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *file = fopen(path, "r");
    if (!file) {
        fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
        exit(2);
    }
    return file;
}

/* Strips the line end; returns false for blank lines and comments. */
static inline bool vectors_meaningful(char *line)
{
    line[strcspn(line, "\r\n")] = '\0';
    return line[0] != '\0' && line[0] != '#';
}

static inline void vectors_bad_line(const char *file, int lineno, const char *line)
{
    fprintf(stderr, "%s:%d: cannot read vector line: %s\n", file, lineno, line);
    exit(2);
}

/* A vector's string: %XX bytes, "%" alone the empty string. Writes into `out`
 * (room for `room` bytes) and returns the length. */
static inline size_t vectors_decode(const char *text, char *out, size_t room)
{
    size_t len = 0;
    if (strcmp(text, "%") == 0)
        return 0;
    for (const char *at = text; *at != '\0' && len < room; at++) {
        unsigned byte;
        if (*at == '%' && sscanf(at + 1, "%2x", &byte) == 1) {
            out[len++] = (char)byte;
            at += 2;
        } else {
            out[len++] = *at;
        }
    }
    return len;
}

/* A key written "=" then hex bytes, into `out` (room for 64); its length. */
static inline size_t vectors_unhex(const char *token, char *out)
{
    size_t len = 0;
    for (const char *p = token + 1; p[0] && p[1] && len < 64; p += 2) {
        unsigned byte;
        sscanf(p, "%2x", &byte);
        out[len++] = (char)byte;
    }
    return len;
}

#endif
