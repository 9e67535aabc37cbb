//! Harbor's cron expressions: six fields, seconds first (`0 0 3 * * 6` is 03:00
//! every Saturday), as Harbor's job service reads them (robfig/cron with
//! seconds): `*` and `?`, lists (`1,15`), ranges (`1-5`), steps (`*/10`,
//! `5/15`, `0-30/10`), month and weekday names (`JAN`, `MON-FRI`), and the
//! descriptors `@yearly`, `@monthly`, `@weekly`, `@daily`, `@midnight`,
//! `@hourly`. When both the day of the month and the day of the week are
//! restricted, a day matching either fires (as in cron); when either is `*`
//! or `?`, both must match. Times are UTC.

use std::fmt;
use std::str::FromStr;

use time::{Date, Month, OffsetDateTime, Time};

/// A parsed schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    seconds: u64,
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// Whether the day of the month was `*` or `?`.
    any_day: bool,
    /// Whether the day of the week was `*` or `?`.
    any_weekday: bool,
}

/// Why a cron expression does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronError(pub String);

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CronError {}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// One field's bounds and names.
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const FIELDS: [Field; 6] = [
    Field {
        name: "second",
        min: 0,
        max: 59,
        names: &[],
    },
    Field {
        name: "minute",
        min: 0,
        max: 59,
        names: &[],
    },
    Field {
        name: "hour",
        min: 0,
        max: 23,
        names: &[],
    },
    Field {
        name: "day of month",
        min: 1,
        max: 31,
        names: &[],
    },
    Field {
        name: "month",
        min: 1,
        max: 12,
        names: &MONTHS,
    },
    Field {
        name: "day of week",
        min: 0,
        max: 6,
        names: &WEEKDAYS,
    },
];

impl Field {
    /// A number or a name (`JAN` is 1, `SUN` is 0).
    fn value(&self, text: &str) -> Result<u32, CronError> {
        let upper = text.to_ascii_uppercase();
        if let Some(at) = self.names.iter().position(|n| *n == upper) {
            return Ok(self.min + u32::try_from(at).unwrap_or(0));
        }
        let value: u32 = text
            .parse()
            .map_err(|_| CronError(format!("{}: `{text}` is not a number", self.name)))?;
        if value < self.min || value > self.max {
            return Err(CronError(format!(
                "{}: {value} is outside {}-{}",
                self.name, self.min, self.max
            )));
        }
        Ok(value)
    }

    /// The set of values `text` names, and whether it was `*` or `?`.
    fn parse(&self, text: &str) -> Result<(u64, bool), CronError> {
        let mut bits = 0u64;
        let any = text == "*" || text == "?";
        for part in text.split(',') {
            let (range, step) = match part.split_once('/') {
                Some((range, step)) => {
                    let step: u32 = step.parse().ok().filter(|s| *s > 0).ok_or_else(|| {
                        CronError(format!("{}: `{step}` is not a step", self.name))
                    })?;
                    (range, Some(step))
                }
                None => (part, None),
            };
            let (low, high) = match range {
                "*" | "?" => (self.min, self.max),
                _ => match range.split_once('-') {
                    Some((low, high)) => (self.value(low)?, self.value(high)?),
                    // `5/15`: from 5 to the end, every 15.
                    None if step.is_some() => (self.value(range)?, self.max),
                    None => {
                        let v = self.value(range)?;
                        (v, v)
                    }
                },
            };
            if low > high {
                return Err(CronError(format!(
                    "{}: the range {low}-{high} is empty",
                    self.name
                )));
            }
            let step = step.unwrap_or(1);
            let mut v = low;
            while v <= high {
                bits |= 1 << v;
                v += step;
            }
        }
        Ok((bits, any))
    }
}

impl FromStr for Cron {
    type Err = CronError;

    fn from_str(text: &str) -> Result<Self, CronError> {
        let text = text.trim();
        let expanded = match text.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 0 1 1 *",
            "@monthly" => "0 0 0 1 * *",
            "@weekly" => "0 0 0 * * 0",
            "@daily" | "@midnight" => "0 0 0 * * *",
            "@hourly" => "0 0 * * * *",
            _ if text.starts_with('@') => {
                return Err(CronError(format!("unknown descriptor {text}")));
            }
            _ => text,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 6 {
            return Err(CronError(format!(
                "expected 6 fields (second minute hour day-of-month month day-of-week), found {}",
                fields.len()
            )));
        }
        let mut sets = [(0u64, false); 6];
        for (i, field) in FIELDS.iter().enumerate() {
            sets[i] = field.parse(fields[i])?;
        }
        Ok(Self {
            seconds: sets[0].0,
            minutes: sets[1].0,
            hours: sets[2].0,
            days: sets[3].0,
            months: sets[4].0,
            weekdays: sets[5].0,
            any_day: sets[3].1,
            any_weekday: sets[5].1,
        })
    }
}

fn has(bits: u64, value: u8) -> bool {
    bits & (1 << value) != 0
}

/// Harbor's words for a schedule whose seconds field is not 0.
pub const SECONDS_NOT_ZERO: &str =
    "the 1st field (indicating Seconds of time) of the cron setting must be 0";

impl Cron {
    /// The cron of a schedule (garbage collection, retention, replication,
    /// audit purge): parsed, and refused unless its seconds field is 0, as
    /// Harbor refuses it, so that no schedule fires more than once a minute
    /// (`*/10 * * * * *` would run a job six times a minute).
    pub fn schedule(text: &str) -> Result<Self, CronError> {
        let cron: Self = text.parse()?;
        if cron.seconds != 1 {
            return Err(CronError(SECONDS_NOT_ZERO.to_string()));
        }
        Ok(cron)
    }

    fn day_matches(&self, date: Date) -> bool {
        let day = has(self.days, date.day());
        let weekday = has(self.weekdays, date.weekday().number_days_from_sunday());
        if self.any_day || self.any_weekday {
            day && weekday
        } else {
            day || weekday
        }
    }

    /// The first instant after `after` (to the second) the schedule fires at;
    /// `None` when it never does within five years (`0 0 0 30 2 *`).
    pub fn next_after(&self, after: OffsetDateTime) -> Option<OffsetDateTime> {
        let after = after.to_offset(time::UtcOffset::UTC);
        let limit = after.year() + 5;
        let mut date = after.date();
        let (mut hour, mut minute, mut second) = (after.hour(), after.minute(), after.second() + 1);
        // Moves to the first second of the next day.
        loop {
            if date.year() > limit {
                return None;
            }
            if !has(self.months, u8::from(date.month())) {
                let (year, month) = match date.month() {
                    Month::December => (date.year() + 1, Month::January),
                    m => (date.year(), m.next()),
                };
                date = Date::from_calendar_date(year, month, 1).ok()?;
                (hour, minute, second) = (0, 0, 0);
                continue;
            }
            if !self.day_matches(date) {
                date = date.next_day()?;
                (hour, minute, second) = (0, 0, 0);
                continue;
            }
            match self.time_within(hour, minute, second) {
                Some(at) => return Some(date.with_time(at).assume_utc()),
                None => {
                    date = date.next_day()?;
                    (hour, minute, second) = (0, 0, 0);
                }
            }
        }
    }

    /// The first time of day at or after `hour:minute:second` that matches.
    fn time_within(&self, hour: u8, minute: u8, second: u8) -> Option<Time> {
        let next = |bits: u64, from: u8, max: u8| (from..=max).find(|v| has(bits, *v));
        let mut h = hour;
        let (mut m, mut s) = (minute, second);
        while h <= 23 {
            if has(self.hours, h) {
                let mut mm = m;
                while mm <= 59 {
                    if has(self.minutes, mm)
                        && let Some(ss) = next(self.seconds, if mm == m { s } else { 0 }, 59)
                    {
                        return Time::from_hms(h, mm, ss).ok();
                    }
                    mm += 1;
                }
            }
            h += 1;
            (m, s) = (0, 0);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn next(cron: &str, after: OffsetDateTime) -> OffsetDateTime {
        cron.parse::<Cron>().unwrap().next_after(after).unwrap()
    }

    #[test]
    fn schedules_fire_at_most_once_a_minute() {
        for ok in [
            "0 * * * * *",
            "0 */5 * * * *",
            "0 0 3 * * 6",
            "00 0 0 * * *",
            "@hourly",
            "@daily",
        ] {
            assert!(Cron::schedule(ok).is_ok(), "{ok}");
        }
        for every_second in [
            "* * * * * *",
            "*/10 * * * * *",
            "0,30 * * * * *",
            "5 * * * * *",
            "0-1 0 0 * * *",
        ] {
            assert_eq!(
                Cron::schedule(every_second),
                Err(CronError(SECONDS_NOT_ZERO.into())),
                "{every_second}"
            );
        }
        assert!(Cron::schedule("0 0 25 * * *").is_err(), "still parsed");
    }

    #[test]
    fn harbors_schedule_types() {
        let at = datetime!(2026-11-26 22:17:05 UTC);
        // Hourly, Daily, Weekly as Harbor's portal writes them.
        assert_eq!(next("0 0 * * * *", at), datetime!(2026-11-26 23:00:00 UTC));
        assert_eq!(next("0 0 0 * * *", at), datetime!(2026-11-27 00:00:00 UTC));
        assert_eq!(next("0 0 0 * * 0", at), datetime!(2026-11-29 00:00:00 UTC));
        assert_eq!(next("@hourly", at), next("0 0 * * * *", at));
        assert_eq!(next("@weekly", at), next("0 0 0 * * 0", at));
        assert_eq!(next("@monthly", at), datetime!(2026-12-01 00:00:00 UTC));
        assert_eq!(next("@yearly", at), datetime!(2027-01-01 00:00:00 UTC));
    }

    #[test]
    fn fields_lists_ranges_steps_and_names() {
        let at = datetime!(2026-11-26 22:17:05 UTC); // a Thursday
        assert_eq!(
            next("*/10 * * * * *", at),
            datetime!(2026-11-26 22:17:10 UTC)
        );
        assert_eq!(
            next("5/15 * * * * *", at),
            datetime!(2026-11-26 22:17:20 UTC)
        );
        assert_eq!(
            next("0 0-30/10 * * * *", at),
            datetime!(2026-11-26 22:20:00 UTC)
        );
        assert_eq!(
            next("0 30 9,12,15 * * *", at),
            datetime!(2026-11-27 09:30:00 UTC)
        );
        assert_eq!(
            next("0 0 3 * * MON-FRI", at),
            datetime!(2026-11-27 03:00:00 UTC)
        );
        assert_eq!(
            next("0 0 3 * * sat", at),
            datetime!(2026-11-28 03:00:00 UTC)
        );
        assert_eq!(
            next("0 0 0 1 JAN,jul ?", at),
            datetime!(2027-01-01 00:00:00 UTC)
        );
        assert_eq!(next("0 0 0 29 2 *", at), datetime!(2028-02-29 00:00:00 UTC));
        // Strictly after: the instant itself does not count.
        assert_eq!(
            next("5 17 22 * * *", at),
            datetime!(2026-11-27 22:17:05 UTC)
        );
        assert_eq!(next("* * * * * *", at), datetime!(2026-11-26 22:17:06 UTC));
        assert_eq!(
            next("59 59 23 31 12 *", datetime!(2026-12-31 23:59:58 UTC)),
            datetime!(2026-12-31 23:59:59 UTC)
        );
    }

    #[test]
    fn a_restricted_day_of_month_or_of_week_fires_either() {
        let at = datetime!(2026-11-26 22:17:05 UTC);
        // The 1st or a Monday: Monday the 30th comes first.
        assert_eq!(
            next("0 0 0 1 * MON", at),
            datetime!(2026-11-30 00:00:00 UTC)
        );
        // With `*` for the weekday, only the 1st.
        assert_eq!(next("0 0 0 1 * *", at), datetime!(2026-12-01 00:00:00 UTC));
    }

    #[test]
    fn bad_expressions_say_why() {
        for (text, why) in [
            ("0 0 * * *", "expected 6 fields"),
            ("60 * * * * *", "second: 60 is outside 0-59"),
            ("* * 24 * * *", "hour: 24 is outside 0-23"),
            ("* * * 0 * *", "day of month: 0 is outside 1-31"),
            ("* * * * 13 *", "month: 13 is outside 1-12"),
            ("* * * * * 7", "day of week: 7 is outside 0-6"),
            ("*/0 * * * * *", "second: `0` is not a step"),
            ("* 30-10 * * * *", "minute: the range 30-10 is empty"),
            ("x * * * * *", "second: `x` is not a number"),
            ("@fortnightly", "unknown descriptor"),
        ] {
            let err = text.parse::<Cron>().unwrap_err();
            assert!(err.0.contains(why), "{text}: {err}");
        }
        assert_eq!(
            "0 0 0 30 2 *"
                .parse::<Cron>()
                .unwrap()
                .next_after(datetime!(2026-01-01 0:00 UTC)),
            None
        );
    }
}
