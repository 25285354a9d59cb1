/* An SVG chart: GPU busy hours per project per day (or per run of days, at most 62 bars),
 * stacked bars, a y axis in hours and a legend. Self-contained: no scripts, fonts or links. */
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

static void axis(FILE *f, const sl_usage_view *v, double ymax)
{
    for (int i = 0; i <= 5; i++) {
        double y = PLOT_Y + PLOT_H - PLOT_H * i / 5.0;
        fprintf(f,
                "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n"
                "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\">%g</text>\n",
                PLOT_X, y, PLOT_X + PLOT_W, y, PLOT_X - 6, y + 4, ymax * i / 5.0);
    }
    fprintf(f,
            "<text x=\"16\" y=\"%d\" font-size=\"12\" transform=\"rotate(-90 16 %d)\" "
            "text-anchor=\"middle\">GPU hours</text>\n",
            PLOT_Y + PLOT_H / 2, PLOT_Y + PLOT_H / 2);
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

sl_code sl_usage_render_svg(const sl_usage_view *v, FILE *f)
{
    double ymax_h = 0;
    for (size_t b = 0; b < v->n_buckets; b++) {
        double sum = 0;
        for (size_t t = 0; t < v->n_tenants; t++)
            sum += v->tenants[t].bucket_busy_s[b];
        if (sum / 3600.0 > ymax_h)
            ymax_h = sum / 3600.0;
    }
    double ymax = nice_max(ymax_h);
    int height = LEGEND_Y + LEGEND_H * (int)(v->n_tenants ? v->n_tenants : 1) + 20;
    char from[40], to[40];
    sl_usage_format_time(v->from_ns, 0, from, sizeof from);
    sl_usage_format_time(v->to_ns, 0, to, sizeof to);
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
            "<title>GPU hours per project, %s to %s</title>\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n"
            "<text x=\"%d\" y=\"28\" font-size=\"16\">GPU hours per project per %s, %s to %s "
            "(UTC)</text>\n",
            W, height, W, height, from, to, W, height, PLOT_X,
            v->bucket_ns == SL_USAGE_DAY_NS ? "day" : "bucket", from, to);
    axis(f, v, ymax);
    double bw = (double)PLOT_W / (double)v->n_buckets;
    for (size_t b = 0; b < v->n_buckets; b++) {
        double y = PLOT_Y + PLOT_H;
        for (size_t t = 0; t < v->n_tenants; t++) {
            double hours = v->tenants[t].bucket_busy_s[b] / 3600.0;
            double h = PLOT_H * hours / ymax;
            if (!(h > 0))
                continue;
            y -= h;
            fprintf(f,
                    "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\">"
                    "<title>",
                    PLOT_X + bw * (double)b + bw * 0.1, y, bw * 0.8, h, palette[t % NPAL]);
            text(f, v->tenants[t].project);
            fprintf(f, ": %.4f h</title></rect>\n", hours);
        }
    }
    if (!v->n_tenants)
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"14\">no usage in this period</text>\n",
                PLOT_X + 20, PLOT_Y + PLOT_H / 2);
    for (size_t t = 0; t < v->n_tenants; t++) {
        int y = LEGEND_Y + LEGEND_H * (int)t;
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>\n"
                "<text x=\"%d\" y=\"%d\" font-size=\"12\">",
                PLOT_X, y, palette[t % NPAL], PLOT_X + 18, y + 10);
        text(f, v->tenants[t].project);
        fprintf(f, ": %.4f GPU h of %.4f entitled</text>\n", v->tenants[t].total.busy_s / 3600.0,
                v->tenants[t].total.entitled_s / 3600.0);
    }
    fputs("</svg>\n", f);
    return SL_OK;
}
