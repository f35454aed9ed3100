/* katcp_clock.c: katgpucbf's clock-quality sensors (utils.py's
 * add_time_sync_sensors, aiokatcp's TimeSyncUpdater): time.esterror,
 * time.maxerror, time.state and time.synchronised, read from the kernel's
 * clock discipline with a read-only ntp_adjtime() (adjtimex(2), modes 0:
 * no privilege needed) each time a client reads them, with katgpucbf's
 * thresholds. Every timestamp the engine gives (rx.unixtime, ?delays'
 * start time) is only as good as this clock, which is why CAM watches it. */
#include <stdio.h>
#include <sys/timex.h>

#include "katcp_engine.h"

/* katgpucbf's thresholds (utils.py): seconds. */
#define TIME_ESTERROR_WARN 1e-3
#define TIME_ESTERROR_ERROR 5e-3   /* CBF-REQ-0203: 5 ms */
#define TIME_MAXERROR_WARN 10e-3
#define TIME_MAXERROR_ERROR 0.1

static cbf_katcp_status error_status(double s, double warn, double error)
{
    return s >= 0.0 && s < warn ? CBF_KATCP_NOMINAL : s < error ? CBF_KATCP_WARN : CBF_KATCP_ERROR;
}

int cbf_katcp_engine_clock(cbf_katcp_sensors *out, double now)
{
    /* aiokatcp's ClockState: adjtimex's return, TIME_OK .. TIME_ERROR */
    static const char *const states[] = {"ok", "ins", "del", "oop", "wait", "error"};
    static const cbf_katcp_sensor_info est = {"time.esterror", "Estimated time synchronisation error", "s",
                                              CBF_KATCP_FLOAT, NULL, 0},
                                       max = {"time.maxerror", "Upper bound on time synchronisation error",
                                              "s", CBF_KATCP_FLOAT, NULL, 0},
                                       state = {"time.state", "Kernel clock state", "", CBF_KATCP_DISCRETE,
                                                states, 6},
                                       sync = {"time.synchronised",
                                               "Whether the host clock is synchronised within tolerances", "",
                                               CBF_KATCP_BOOLEAN, NULL, 0};
    struct timex tx = {.modes = 0};
    int rc = ntp_adjtime(&tx);
    if (rc < 0 || rc > 5) {
        /* aiokatcp marks them inactive where there is no adjtimex */
        int e = cbf_katcp_sensors_put(out, &est, CBF_KATCP_INACTIVE, "0", now);
        e = e ? e : cbf_katcp_sensors_put(out, &max, CBF_KATCP_INACTIVE, "0", now);
        e = e ? e : cbf_katcp_sensors_put(out, &state, CBF_KATCP_INACTIVE, "error", now);
        return e ? e : cbf_katcp_sensors_put(out, &sync, CBF_KATCP_ERROR, "0", now);
    }
    /* esterror and maxerror are microseconds whatever STA_NANO says */
    const double es = 1e-6 * (double)tx.esterror, ms = 1e-6 * (double)tx.maxerror;
    const cbf_katcp_status es_st = error_status(es, TIME_ESTERROR_WARN, TIME_ESTERROR_ERROR),
                           ms_st = error_status(ms, TIME_MAXERROR_WARN, TIME_MAXERROR_ERROR),
                           state_st = rc == TIME_OK      ? CBF_KATCP_NOMINAL
                                      : rc == TIME_ERROR ? CBF_KATCP_ERROR
                                                         : CBF_KATCP_WARN; /* a leap second */
    const int good = es_st != CBF_KATCP_ERROR && ms_st != CBF_KATCP_ERROR && state_st != CBF_KATCP_ERROR;
    char v[2][32];
    snprintf(v[0], sizeof v[0], "%.17g", es);
    snprintf(v[1], sizeof v[1], "%.17g", ms);
    int e = cbf_katcp_sensors_put(out, &est, es_st, v[0], now);
    e = e ? e : cbf_katcp_sensors_put(out, &max, ms_st, v[1], now);
    e = e ? e : cbf_katcp_sensors_put(out, &state, state_st, states[rc], now);
    return e ? e : cbf_katcp_sensors_put(out, &sync, good ? CBF_KATCP_NOMINAL : CBF_KATCP_ERROR, good ? "1" : "0",
                                         now);
}
