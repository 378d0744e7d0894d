//! The UTC calendar, once: the meters' periods (the model budget's month, the call cap's and the
//! browser meter's day) and the dates a person reads. A unix time to a civil date is Howard
//! Hinnant's days-to-civil algorithm, exact for every `i64` day count the clock can give.

/// The UTC civil date `(year, month, day)` of a unix time in seconds.
pub fn utc_date(unix_secs: i64) -> (i64, u32, u32) {
    let z = unix_secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    // Both fit: a day is 1..=31, a month 1..=12.
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The UTC day (`YYYY-MM-DD`) a unix time in seconds falls in.
pub fn utc_day(unix_secs: i64) -> String {
    let (y, m, d) = utc_date(unix_secs);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The UTC month (`YYYY-MM`) a unix time in seconds falls in.
pub fn utc_month(unix_secs: i64) -> String {
    let (y, m, _) = utc_date(unix_secs);
    format!("{y:04}-{m:02}")
}

/// A unix time in seconds as a person reads it: `YYYY-MM-DD HH:MMZ`.
pub fn utc_minute(unix_secs: i64) -> String {
    let rest = unix_secs.rem_euclid(86_400);
    format!("{} {:02}:{:02}Z", utc_day(unix_secs), rest / 3600, rest % 3600 / 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dates_follow_the_calendar() {
        assert_eq!(utc_date(0), (1970, 1, 1));
        assert_eq!(utc_day(86_400), "1970-01-02");
        assert_eq!(utc_day(-1), "1969-12-31");
        assert_eq!(utc_day(951_782_400), "2000-02-29");
        assert_eq!(utc_day(1_709_251_199), "2024-02-29");
        assert_eq!(utc_month(1_796_009_402), "2026-11");
        assert_eq!(utc_month(1_798_761_599), "2026-12"); // 2026-12-31T23:59:59Z
        assert_eq!(utc_month(1_798_761_600), "2027-01");
        assert_eq!(utc_minute(0), "1970-01-01 00:00Z");
        assert_eq!(utc_minute(1_796_000_000), "2026-11-30 00:53Z");
    }

    /// Days counted one by one from 1970-01-01 with the Gregorian leap rule.
    fn counted(days: i64) -> (i64, u32, u32) {
        let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let month_days = |y: i64, m: u32| match m {
            2 if leap(y) => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        let (mut y, mut m, mut d) = (1970i64, 1u32, 1u32);
        for _ in 0..days {
            d += 1;
            if d > month_days(y, m) {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
        (y, m, d)
    }

    proptest! {
        /// The algorithm agrees with counting days, over four centuries from 1970.
        #[test]
        fn the_date_is_the_counted_date(days in 0i64..146_097, second in 0i64..86_400) {
            prop_assert_eq!(utc_date(days * 86_400 + second), counted(days));
        }

        /// The next day is one day on, whatever the second of the day.
        #[test]
        fn a_day_is_one_date(secs in -10_000_000_000i64..10_000_000_000) {
            let day = secs.div_euclid(86_400) * 86_400;
            prop_assert_eq!(utc_date(secs), utc_date(day));
            prop_assert!(utc_date(day + 86_400) > utc_date(day));
        }
    }
}
