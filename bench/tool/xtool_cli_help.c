/*
 * The xattn tool's --help texts and the manual's option list, both written
 * from the table of options (xtool_cli_table.c): what a command accepts is
 * what its help and the manual list.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_cli.h"
#include "xtool_cli_table.h"

#define XTOOL__HELP_COL 35 /* where an option's text starts */
#define XTOOL__HELP_WIDTH 100

/* A row of the command's help and manual: taken by it, not a refusal. */
static int xtool__listed(const xtool_opt_def *d, xtool_cli_cmd cmd)
{
    return (d->cmds & XTOOL_CMD_BIT(cmd)) && !d->refused;
}

/* The value as the command takes it: a list or one value. */
static const char *xtool__arg(const xtool_opt_def *d, xtool_cli_cmd cmd)
{
    if (d->arg_list && !(d->one_value & XTOOL_CMD_BIT(cmd)))
        return d->arg_list;
    return d->arg;
}

/* "--sq LIST", "--causal[=top-left|bottom-right]", "--alibi". */
static void xtool__flag_text(const xtool_opt_def *d, const char *arg, char *out, size_t n)
{
    if (!arg)
        snprintf(out, n, "--%s", d->name);
    else if (d->optional_value)
        snprintf(out, n, "--%s[=%s]", d->name, arg);
    else
        snprintf(out, n, "--%s %s", d->name, arg);
}

/* The help sentence with its default: "query heads (default 8)". */
static void xtool__text(const xtool_opt_def *d, char *out, size_t n)
{
    const char *dflt = d->dflt ? d->dflt : d->dflt_note;
    if (dflt)
        snprintf(out, n, "%s (default %s)", d->help, dflt);
    else
        snprintf(out, n, "%s", d->help);
}

/* Writes text from column `col` to XTOOL__HELP_WIDTH, wrapping at spaces;
 * the cursor is at column `at` (a new line is started when no space is left
 * before col). */
static void xtool__wrap(FILE *f, const char *text, int at, int col)
{
    if (at >= col) {
        fputc('\n', f);
        at = 0;
    }
    fprintf(f, "%*s", col - at, "");
    int x = col;
    const char *p = text;
    while (*p) {
        size_t w = strcspn(p, " ");
        if (x > col && x + 1 + (int)w > XTOOL__HELP_WIDTH) {
            fprintf(f, "\n%*s", col, "");
            x = col;
        } else if (x > col) {
            fputc(' ', f);
            x++;
        }
        fwrite(p, 1, w, f);
        x += (int)w;
        p += w;
        while (*p == ' ')
            p++;
    }
    fputc('\n', f);
}

/* Every line of `text` indented by two spaces. */
static void xtool__indent(FILE *f, const char *text)
{
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "\n");
        fprintf(f, "  %.*s\n", (int)len, p);
        p += len + (p[len] == '\n');
    }
}

void xtool_cli_help_print(FILE *f, xtool_cli_cmd cmd)
{
    if (cmd <= XTOOL_CLI_NONE || cmd >= XTOOL_CLI_CMD_COUNT)
        return;
    const xtool_cmd_def *c = &xtool_cmd_defs[cmd];
    fprintf(f, "usage: xattn %s %s\n", c->name, c->usage);
    xtool__indent(f, c->about);
    for (int s = 0; s < XTOOL_SEC_COUNT; s++) {
        int first = 1;
        for (size_t i = 0; i < xtool_opt_ndefs; i++) {
            const xtool_opt_def *d = &xtool_opt_defs[i];
            if (!xtool__listed(d, cmd) || (int)d->section != s)
                continue;
            if (first)
                fprintf(f, "\n%s:\n", xtool_opt_section_titles[s]);
            first = 0;
            char flag[96], text[640];
            xtool__flag_text(d, xtool__arg(d, cmd), flag, sizeof flag);
            xtool__text(d, text, sizeof text);
            fprintf(f, "  %s", flag);
            xtool__wrap(f, text, 2 + (int)strlen(flag), XTOOL__HELP_COL);
        }
    }
    fprintf(f, "\n%s\n", c->exit_text);
}

const char *xtool_cli_help_text(xtool_cli_cmd cmd)
{
    static char *texts[XTOOL_CLI_CMD_COUNT]; /* made once, kept for the process */
    if (cmd <= XTOOL_CLI_NONE || cmd >= XTOOL_CLI_CMD_COUNT)
        return "";
    if (!texts[cmd]) {
        size_t len = 0;
        FILE *f = open_memstream(&texts[cmd], &len);
        if (!f)
            return "";
        xtool_cli_help_print(f, cmd);
        fclose(f);
    }
    return texts[cmd] ? texts[cmd] : "";
}

void xtool_cli_commands_print(FILE *f)
{
    fprintf(f, "usage: xattn <command> [options]\n\ncommands:\n");
    for (int c = 1; c < XTOOL_CLI_CMD_COUNT; c++)
        fprintf(f, "  %-9s %s\n", xtool_cmd_defs[c].name, xtool_cmd_defs[c].summary);
    fprintf(f, "\n'xattn <command> --help' shows a command's options; 'xattn --version' the "
               "version.\nExit status: 0 ok, 1 a run failed or disagreed with the reference, 2 "
               "bad command line.\n");
}

/* ---- the manual ------------------------------------------------------------------- */

/* A markdown table cell: '|' escaped. */
static void xtool__md(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputc('\\', f);
        fputc(*s, f);
    }
}

/* "run, bench and advise" */
static void xtool__md_cmds(FILE *f, unsigned cmds)
{
    int total = 0, k = 0;
    for (int c = 1; c < XTOOL_CLI_CMD_COUNT; c++)
        total += (cmds & XTOOL_CMD_BIT(c)) != 0;
    if (total == XTOOL_CLI_CMD_COUNT - 1) {
        fputs("all", f);
        return;
    }
    for (int c = 1; c < XTOOL_CLI_CMD_COUNT; c++)
        if (cmds & XTOOL_CMD_BIT(c))
            fprintf(f, "%s%s", k++ == 0 ? "" : k == total ? " and " : ", ", xtool_cmd_defs[c].name);
}

void xtool_cli_manual_print(FILE *f)
{
    for (int s = 0; s < XTOOL_SEC_COUNT; s++) {
        int first = 1;
        for (size_t i = 0; i < xtool_opt_ndefs; i++) {
            const xtool_opt_def *d = &xtool_opt_defs[i];
            if (d->refused || (int)d->section != s)
                continue;
            if (first)
                fprintf(f,
                        "%s**%s**\n\n| option | commands | what it does | default |\n"
                        "|---|---|---|---|\n",
                        s ? "\n" : "", xtool_opt_section_titles[s]);
            first = 0;
            char flag[96];
            /* the list form where a command takes a list; the rest take one value */
            xtool__flag_text(d, d->arg_list && (d->cmds & ~d->one_value) ? d->arg_list : d->arg,
                             flag, sizeof flag);
            fputs("| `", f);
            xtool__md(f, flag);
            fputs("` | ", f);
            xtool__md_cmds(f, d->cmds);
            fputs(" | ", f);
            xtool__md(f, d->help);
            if (d->arg_list && d->one_value) {
                fputs("; one value in ", f);
                xtool__md_cmds(f, d->one_value);
            }
            fputs(" | ", f);
            xtool__md(f, d->dflt ? d->dflt : d->dflt_note ? d->dflt_note : "");
            fputs(" |\n", f);
        }
    }
}
