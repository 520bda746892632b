//! An estimated cost stored in micro-dollars (`estimated_cost_micros`), shown in dollars.

/// `micros` as dollars to four places, rounded half away from zero in integers (exact for
/// every stored value, where going through `f64` is not past 2^53 micro-dollars), the sign
/// before the dollar sign: `11650` is `$0.0117`, `-1234567` is `-$1.2346`.
pub fn dollars(micros: i64) -> String {
    let abs = i128::from(micros).unsigned_abs();
    let hundredths_of_cents = (abs + 50) / 100;
    let sign = if micros < 0 { "-" } else { "" };
    format!(
        "{sign}${}.{:04}",
        hundredths_of_cents / 10_000,
        hundredths_of_cents % 10_000
    )
}

#[cfg(test)]
mod tests {
    use super::dollars;

    #[test]
    fn dollars_are_exact_and_rounded() {
        assert_eq!(dollars(0), "$0.0000");
        assert_eq!(dollars(11650), "$0.0117");
        assert_eq!(dollars(49), "$0.0000");
        assert_eq!(dollars(50), "$0.0001");
        assert_eq!(dollars(-1_234_567), "-$1.2346");
        assert_eq!(dollars(i64::MAX), "$9223372036854.7758");
        assert_eq!(dollars(i64::MIN), "-$9223372036854.7758");
    }
}
