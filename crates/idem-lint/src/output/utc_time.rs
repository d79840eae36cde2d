//! Milliseconds since the Unix epoch as a UTC time people read (`2026-12-04T00:27:37Z`), for
//! the inventory's tables; JSON keeps the number.

/// `ms` as `YYYY-MM-DDTHH:MM:SSZ` (UTC, seconds truncated); a time before 1970 or past year
/// 9999 is shown as the number of milliseconds.
pub(crate) fn utc(ms: i64) -> String {
    const MAX_MS: i64 = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
    if !(0..=MAX_MS).contains(&ms) {
        return format!("{ms} ms");
    }
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`), for days ≥ 0.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn known_instants() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        // 2000-02-29 (a leap day of a century leap year), 12:34:56.789
        assert_eq!(utc(951_827_696_789), "2000-02-29T12:34:56Z");
        assert_eq!(utc(1_764_806_400_000), "2025-12-04T00:00:00Z");
        assert_eq!(utc(-1), "-1 ms");
    }
}
