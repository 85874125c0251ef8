//! The little linear algebra the fit needs: symmetric matrices of at most six rows.

/// Eigenvalues and eigenvectors (as columns: `v[i][m]` is row i of vector m) of a symmetric
/// matrix, by cyclic Jacobi rotations.
pub(super) fn sym_eigen(a: &[Vec<f64>]) -> (Vec<f64>, Vec<Vec<f64>>) {
    let n = a.len();
    let mut a: Vec<Vec<f64>> = a.to_vec();
    let mut v = vec![vec![0.0; n]; n];
    for (i, row) in v.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i][j] * a[i][j])
            .sum();
        let scale: f64 = (0..n).map(|i| a[i][i] * a[i][i]).sum::<f64>().max(f64::MIN_POSITIVE);
        if off <= 1e-30 * scale {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                if a[p][q].abs() < f64::MIN_POSITIVE {
                    continue;
                }
                let theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q]);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for row in a.iter_mut() {
                    let (akp, akq) = (row[p], row[q]);
                    row[p] = c * akp - s * akq;
                    row[q] = s * akp + c * akq;
                }
                let (top, bottom) = a.split_at_mut(q); // p < q
                for (apk, aqk) in top[p].iter_mut().zip(bottom[0].iter_mut()) {
                    let (x, y) = (*apk, *aqk);
                    *apk = c * x - s * y;
                    *aqk = s * x + c * y;
                }
                for row in v.iter_mut() {
                    let (vkp, vkq) = (row[p], row[q]);
                    row[p] = c * vkp - s * vkq;
                    row[q] = s * vkp + c * vkq;
                }
            }
        }
    }
    ((0..n).map(|i| a[i][i]).collect(), v)
}

/// The pseudo-inverse of a symmetric positive semi-definite matrix: directions whose
/// eigenvalue is below `1e-12` of the largest get an inverse of `1e30` (unknown along them).
pub(super) fn pinv(a: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let n = a.len();
    let (w, v) = sym_eigen(a);
    let top = w.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let inv: Vec<f64> = w.iter().map(|&x| if x > 1e-12 * top && x > 0.0 { 1.0 / x } else { 1e30 }).collect();
    let mut out = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..n {
            out[i][j] = (0..n).map(|m| v[i][m] * inv[m] * v[j][m]).sum();
        }
    }
    out
}

/// Solves `a x = b` for symmetric positive definite `a` (by its eigenvectors; directions of no
/// curvature get no step).
pub(super) fn solve(a: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let n = a.len();
    let (w, v) = sym_eigen(a);
    let top = w.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let mut x = vec![0.0; n];
    for m in 0..n {
        if w[m] <= 1e-14 * top || w[m] <= 0.0 {
            continue;
        }
        let proj: f64 = (0..n).map(|i| v[i][m] * b[i]).sum::<f64>() / w[m];
        for i in 0..n {
            x[i] += proj * v[i][m];
        }
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eigen_and_inverse_of_a_known_matrix() {
        // [[2, 1], [1, 2]]: eigenvalues 1 and 3; inverse [[2, −1], [−1, 2]] / 3.
        let a = vec![vec![2.0, 1.0], vec![1.0, 2.0]];
        let (mut w, _) = sym_eigen(&a);
        w.sort_by(f64::total_cmp);
        assert!((w[0] - 1.0).abs() < 1e-12 && (w[1] - 3.0).abs() < 1e-12, "{w:?}");
        let inv = pinv(&a);
        assert!((inv[0][0] - 2.0 / 3.0).abs() < 1e-12 && (inv[0][1] + 1.0 / 3.0).abs() < 1e-12);
        let x = solve(&a, &[3.0, 3.0]);
        assert!((x[0] - 1.0).abs() < 1e-12 && (x[1] - 1.0).abs() < 1e-12, "{x:?}");
        // A singular matrix: the unseen direction is unknown, not zero.
        let s = vec![vec![1.0, 1.0], vec![1.0, 1.0]];
        assert!(pinv(&s)[0][0] > 1e20);
    }
}
