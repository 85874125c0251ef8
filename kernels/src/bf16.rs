//! bf16 as stored on the GPU (the top half of an f32), with round-to-nearest-even conversion.

/// Rounds an f32 to the nearest bf16 (ties to even); NaN stays NaN.
pub(crate) fn from_f32(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    let round = 0x7fff + ((bits >> 16) & 1);
    ((bits + round) >> 16) as u16
}

pub(crate) fn to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// Rounds every value to bf16 precision, in place (so CPU references see what the GPU sees).
pub(crate) fn round_slice(v: &mut [f32]) {
    for x in v {
        *x = to_f32(from_f32(*x));
    }
}

pub(crate) fn encode(v: &[f32]) -> Vec<u16> {
    v.iter().map(|&x| from_f32(x)).collect()
}

pub(crate) fn decode(v: &[u16]) -> Vec<f32> {
    v.iter().map(|&b| to_f32(b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rounding() {
        for x in [0.0f32, 1.0, -2.5, 3.140625, 65280.0] {
            assert_eq!(to_f32(from_f32(x)), x, "{x} is exactly representable");
        }
        // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
        assert_eq!(to_f32(from_f32(1.0 + 1.0 / 256.0)), 1.0);
        // 1 + 3·2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: to even (1 + 2^-6).
        assert_eq!(to_f32(from_f32(1.0 + 3.0 / 256.0)), 1.0 + 1.0 / 64.0);
        assert!(to_f32(from_f32(f32::NAN)).is_nan());
        // 8 significant bits: the relative error of rounding is at most 2^-8.
        for i in 1..1000 {
            let x = i as f32 * 0.0137;
            assert!((to_f32(from_f32(x)) - x).abs() / x <= 1.0 / 256.0);
        }
    }
}
