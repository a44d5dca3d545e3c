/* SPDX-License-Identifier: MIT
 * One line per event on stderr (journald adds the timestamp when run by
 * systemd).  Lines about a run carry `uid=` and `run=` so an operator can
 * grep one snippet's story.
 */
#ifndef KOTOBA_LOG_H
#define KOTOBA_LOG_H
#include <stdbool.h>

enum log_level { LOG_LVL_ERR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };
extern enum log_level log_threshold;

void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_err(...) log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)
#endif
