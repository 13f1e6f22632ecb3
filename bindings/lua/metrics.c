/* The metrics list (a part of bindings/cellrate_lua.c; docs/design.md §17). */

/* cellrate.metrics(): the metrics every exporter publishes (cr_metrics), an
 * array of tables of the table's fields: labels an array of { name,
 * attribute }, label one (nil: none), by one (nil: none: the label of a
 * stats_by() row's name), samples an array of { field, value } (value nil:
 * none). */
static void push_metric_label(lua_State *L, const cr_metric_label *label)
{
    lua_createtable(L, 0, 2);
    lua_pushstring(L, label->name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, label->attribute);
    lua_setfield(L, -2, "attribute");
}

static int metrics(lua_State *L)
{
    size_t count;
    const cr_metric *list = cr_metrics(&count);
    lua_createtable(L, (int)count, 0);
    for (size_t i = 0; i < count; i++) {
        const cr_metric *metric = &list[i];
        lua_createtable(L, 0, 11);
        const char *const text[][2] = {
            {"name", metric->name},
            {"prometheus_name", metric->prometheus_name},
            {"help", metric->help},
            {"type", metric->type},
            {"instrument", metric->instrument},
            {"unit", metric->unit},
            {"stats", metric->stats},
        };
        for (size_t t = 0; t < sizeof text / sizeof text[0]; t++) {
            lua_pushstring(L, text[t][1]);
            lua_setfield(L, -2, text[t][0]);
        }
        lua_createtable(L, (int)metric->label_count, 0);
        for (size_t l = 0; l < metric->label_count; l++) {
            push_metric_label(L, &metric->labels[l]);
            lua_rawseti(L, -2, (int)l + 1);
        }
        lua_setfield(L, -2, "labels");
        if (metric->label.name != NULL) {
            push_metric_label(L, &metric->label);
            lua_setfield(L, -2, "label");
        }
        if (metric->by.name != NULL) {
            push_metric_label(L, &metric->by);
            lua_setfield(L, -2, "by");
        }
        lua_createtable(L, (int)metric->sample_count, 0);
        for (size_t s = 0; s < metric->sample_count; s++) {
            lua_createtable(L, 0, 2);
            lua_pushstring(L, metric->samples[s].field);
            lua_setfield(L, -2, "field");
            lua_pushstring(L, metric->samples[s].value); /* NULL: nil */
            lua_setfield(L, -2, "value");
            lua_rawseti(L, -2, (int)s + 1);
        }
        lua_setfield(L, -2, "samples");
        lua_rawseti(L, -2, (int)i + 1);
    }
    return 1;
}
