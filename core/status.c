/* The status table (cellrate/status.h, CR_STATUS_LIST): messages, parameters,
 * classes and names; and the version of the library. */
#include "cellrate.h"

const char *cr_version(void) { return CR_VERSION_STRING; }

static const struct {
    cr_status_class class_of;
    const char *param;
    const char *message;
} status_table[CR_STATUS_COUNT] = {
#define CR_STATUS_ROW_(number, name, class, param, message) \
    [number] = {CR_STATUS_##class, param, message},
    CR_STATUS_LIST(CR_STATUS_ROW_)
#undef CR_STATUS_ROW_
};

/* Each number below CR_STATUS_COUNT and used once (a duplicate is a
 * duplicate case label in cr_status_name); a number without a row is
 * reserved and reads as out of range. */
#define CR_STATUS_DENSE_(number, name, class, param, message) \
    _Static_assert((number) >= 0 && (number) < CR_STATUS_COUNT, "status " #name " out of range");
CR_STATUS_LIST(CR_STATUS_DENSE_)
#undef CR_STATUS_DENSE_

const char *cr_strerror(cr_status status)
{
    if ((unsigned)status >= CR_STATUS_COUNT || !status_table[status].message)
        return "unknown status";
    return status_table[status].message;
}

const char *cr_status_param(cr_status status)
{
    if ((unsigned)status >= CR_STATUS_COUNT || !status_table[status].message)
        return "";
    return status_table[status].param;
}

cr_status_class cr_status_class_of(cr_status status)
{
    if ((unsigned)status >= CR_STATUS_COUNT)
        return CR_STATUS_NONE;
    return status_table[status].class_of;
}

const char *cr_status_name(cr_status status)
{
    switch (status) {
#define CR_STATUS_CASE_(number, name, class, param, message) \
    case number:                                             \
        return #name;
        CR_STATUS_LIST(CR_STATUS_CASE_)
#undef CR_STATUS_CASE_
    default:
        return "";
    }
}
