/* An SVG chart: GPU busy time per project per day (or per run of days, at most 62 bars),
 * stacked bars, the entitled GPU time of the projects shown as a dashed line, a y axis in the
 * unit that suits the figures (hours, minutes, seconds, milliseconds) and a legend. Colours:
 * ten of a qualitative palette, then hues a golden angle apart, so none repeats.
 * Self-contained: no scripts, fonts or links. */
#include <math.h>
#include <string.h>

#include "internal.h"

#define W        960
#define PLOT_X   70
#define PLOT_Y   50
#define PLOT_W   860
#define PLOT_H   300
#define LEGEND_Y (PLOT_Y + PLOT_H + 50)
#define LEGEND_H 18

static const char *const palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                      "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
#define NPAL (sizeof palette / sizeof *palette)

/* The colour of project t: the palette, then hue t x 137.5 degrees (alternating lightness). */
static void colour(size_t t, char out[8])
{
    if (t < NPAL) {
        memcpy(out, palette[t], 8);
        return;
    }
    double h = fmod((double)t * 137.50776, 360.0) / 60.0, s = 0.55, l = t % 2 ? 0.42 : 0.58;
    double c = (1 - fabs(2 * l - 1)) * s, x = c * (1 - fabs(fmod(h, 2.0) - 1)), m = l - c / 2;
    double rgb[6][3] = {{c, x, 0}, {x, c, 0}, {0, c, x}, {0, x, c}, {x, 0, c}, {c, 0, x}};
    const double *v = rgb[(int)h % 6];
    snprintf(out, 8, "#%02x%02x%02x", (unsigned)lround((v[0] + m) * 255),
             (unsigned)lround((v[1] + m) * 255), (unsigned)lround((v[2] + m) * 255));
}

/* The axis unit for figures up to max_s seconds. */
typedef struct unit {
    const char *name; /* "GPU hours" */
    double s;         /* seconds per unit */
} unit;

static unit pick_unit(double max_s)
{
    if (max_s >= 3600.0)
        return (unit){"GPU hours", 3600.0};
    if (max_s >= 60.0)
        return (unit){"GPU minutes", 60.0};
    if (max_s >= 1.0)
        return (unit){"GPU seconds", 1.0};
    return (unit){"GPU milliseconds", 1e-3};
}

static void text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&apos;", f);
            break;
        default:
            if ((unsigned char)*s >= 0x20 && (unsigned char)*s != 0x7f)
                fputc(*s, f);
        }
    }
}

/* A round axis maximum (1, 2 or 5 times a power of ten) >= v. */
static double nice_max(double v)
{
    if (!(v > 0))
        return 1.0;
    double p = pow(10.0, floor(log10(v)));
    const double m[] = {1, 2, 5, 10};
    for (int i = 0; i < 4; i++)
        if (m[i] * p >= v)
            return m[i] * p;
    return 10 * p;
}

static void axis(FILE *f, const sl_usage_view *v, double ymax, unit u)
{
    for (int i = 0; i <= 5; i++) {
        double y = PLOT_Y + PLOT_H - PLOT_H * i / 5.0;
        fprintf(f,
                "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n"
                "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\">%.4g</text>\n",
                PLOT_X, y, PLOT_X + PLOT_W, y, PLOT_X - 6, y + 4, ymax * i / 5.0);
    }
    fprintf(f,
            "<text x=\"16\" y=\"%d\" font-size=\"12\" transform=\"rotate(-90 16 %d)\" "
            "text-anchor=\"middle\">%s</text>\n",
            PLOT_Y + PLOT_H / 2, PLOT_Y + PLOT_H / 2, u.name);
    size_t step = v->n_buckets > 16 ? (v->n_buckets + 15) / 16 : 1;
    double bw = (double)PLOT_W / (double)v->n_buckets;
    for (size_t b = 0; b < v->n_buckets; b += step) {
        char day[40];
        sl_usage_format_time(v->from_ns + (int64_t)b * v->bucket_ns, 0, day, sizeof day);
        day[10] = '\0';
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%s</text>\n",
                PLOT_X + bw * ((double)b + 0.5), PLOT_Y + PLOT_H + 16, day + 5);
    }
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333333\"/>\n"
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333333\"/>\n",
            PLOT_X, PLOT_Y, PLOT_X, PLOT_Y + PLOT_H, PLOT_X, PLOT_Y + PLOT_H, PLOT_X + PLOT_W,
            PLOT_Y + PLOT_H);
}

/* The entitled GPU time of all projects shown, per bucket: a dashed step line. */
static void entitlement(FILE *f, const sl_usage_view *v, double ymax, unit u)
{
    double bw = (double)PLOT_W / (double)v->n_buckets;
    fputs("<polyline fill=\"none\" stroke=\"#333333\" stroke-width=\"1.5\" "
          "stroke-dasharray=\"6 4\" points=\"",
          f);
    for (size_t b = 0; b < v->n_buckets; b++) {
        double sum = 0;
        for (size_t t = 0; t < v->n_tenants; t++)
            sum += v->tenants[t].bucket_entitled_s[b];
        double y = PLOT_Y + PLOT_H - PLOT_H * (sum / u.s) / ymax;
        fprintf(f, "%s%.2f,%.2f %.2f,%.2f", b ? " " : "", PLOT_X + bw * (double)b, y,
                PLOT_X + bw * (double)(b + 1), y);
    }
    fputs("\"><title>entitled GPU time (SLA share x existence)</title></polyline>\n", f);
}

sl_code sl_usage_render_svg(const sl_usage_view *v, FILE *f)
{
    double max_s = 0;
    for (size_t b = 0; b < v->n_buckets; b++) {
        double busy = 0, entitled = 0;
        for (size_t t = 0; t < v->n_tenants; t++) {
            busy += v->tenants[t].bucket_busy_s[b];
            entitled += v->tenants[t].bucket_entitled_s[b];
        }
        max_s = fmax(max_s, fmax(busy, entitled));
    }
    unit u = pick_unit(max_s);
    double ymax = nice_max(max_s / u.s);
    int height = LEGEND_Y + LEGEND_H * (int)(v->n_tenants + 1) + 20;
    char from[40], to[40], col[8], used[32], ent[32];
    sl_usage_format_time(v->from_ns, 0, from, sizeof from);
    sl_usage_format_time(v->to_ns, 0, to, sizeof to);
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
            "<title>GPU time per project, %s to %s</title>\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n"
            "<text x=\"%d\" y=\"28\" font-size=\"16\">GPU time per project per %s, %s to %s "
            "(UTC)</text>\n",
            W, height, W, height, from, to, W, height, PLOT_X,
            v->bucket_ns == SL_USAGE_DAY_NS ? "day" : "bucket", from, to);
    axis(f, v, ymax, u);
    double bw = (double)PLOT_W / (double)v->n_buckets;
    for (size_t b = 0; b < v->n_buckets; b++) {
        double y = PLOT_Y + PLOT_H;
        for (size_t t = 0; t < v->n_tenants; t++) {
            double busy = v->tenants[t].bucket_busy_s[b];
            double h = PLOT_H * (busy / u.s) / ymax;
            if (!(h > 0))
                continue;
            y -= h;
            colour(t, col);
            fprintf(f,
                    "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\">"
                    "<title>",
                    PLOT_X + bw * (double)b + bw * 0.1, y, bw * 0.8, h, col);
            text(f, v->tenants[t].project);
            sl_usage_duration(busy, used, sizeof used);
            fprintf(f, ": %s</title></rect>\n", used);
        }
    }
    if (v->n_tenants)
        entitlement(f, v, ymax, u);
    else
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"14\">no usage in this period</text>\n",
                PLOT_X + 20, PLOT_Y + PLOT_H / 2);
    for (size_t t = 0; t < v->n_tenants; t++) {
        int y = LEGEND_Y + LEGEND_H * (int)t;
        colour(t, col);
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>\n"
                "<text x=\"%d\" y=\"%d\" font-size=\"12\">",
                PLOT_X, y, col, PLOT_X + 18, y + 10);
        text(f, v->tenants[t].project);
        sl_usage_duration(v->tenants[t].total.busy_s, used, sizeof used);
        sl_usage_duration(v->tenants[t].total.entitled_s, ent, sizeof ent);
        fprintf(f, ": %s of GPU time, %s entitled</text>\n", used, ent);
    }
    if (v->n_tenants) {
        int y = LEGEND_Y + LEGEND_H * (int)v->n_tenants;
        fprintf(f,
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333333\" "
                "stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n"
                "<text x=\"%d\" y=\"%d\" font-size=\"12\">entitled GPU time of these "
                "projects (SLA share x time their instances existed)</text>\n",
                PLOT_X, y + 6, PLOT_X + 12, y + 6, PLOT_X + 18, y + 10);
    }
    fputs("</svg>\n", f);
    return SL_OK;
}
