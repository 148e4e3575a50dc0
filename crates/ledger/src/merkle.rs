//! RFC 6962 Merkle tree hashing, and inclusion and consistency proofs: made from any
//! source of perfect-subtree hashes ([`Subtrees`]), checked with the algorithms of
//! RFC 9162 §2.1.3.2 and §2.1.4.2 (which share no code with the making).

use sha2::{Digest as _, Sha256};

/// A SHA-256 tree hash.
pub type Hash = [u8; 32];

/// The hash of a leaf: `SHA-256(0x00 ‖ data)`.
pub fn leaf_hash(data: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(data);
    h.finalize().into()
}

/// The hash of an interior node: `SHA-256(0x01 ‖ left ‖ right)`.
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The root of the empty tree: `SHA-256("")`.
pub fn empty_root() -> Hash {
    Sha256::digest(b"").into()
}

/// The root of a perfect tree over `hashes` (a power of two of them, at least one).
pub fn perfect_root(hashes: &[Hash]) -> Hash {
    debug_assert!(hashes.len().is_power_of_two());
    let mut level: Vec<Hash> = hashes.to_vec();
    while level.len() > 1 {
        level = level
            .chunks(2)
            .map(|pair| node_hash(&pair[0], &pair[1]))
            .collect();
    }
    level[0]
}

/// Where proofs get their hashes from: the hash of the perfect subtree of `2^height`
/// leaves starting at leaf `start` (a multiple of its size).
pub trait Subtrees {
    /// The error a lookup can fail with.
    type Error;
    /// `MTH(D[start : start + 2^height])`.
    ///
    /// # Errors
    ///
    /// Whatever the source fails with when it cannot give the subtree's hash.
    fn perfect(&mut self, start: u64, height: u32) -> Result<Hash, Self::Error>;
}

/// The largest power of two strictly below `n` (`n` ≥ 2).
fn split(n: u64) -> u64 {
    1 << (63 - (n - 1).leading_zeros())
}

/// `MTH(D[a:b])` for `a < b`, from perfect subtrees (RFC 6962 §2.1: the left part of every
/// split is a perfect subtree).
///
/// # Errors
///
/// Whatever `src` fails with for a subtree it cannot give.
pub fn range_hash<S: Subtrees>(src: &mut S, a: u64, b: u64) -> Result<Hash, S::Error> {
    let n = b - a;
    if n.is_power_of_two() && a.is_multiple_of(n) {
        return src.perfect(a, n.trailing_zeros());
    }
    let k = split(n);
    let left = src.perfect(a, k.trailing_zeros())?;
    let right = range_hash(src, a + k, b)?;
    Ok(node_hash(&left, &right))
}

/// The root of the tree of `size` leaves (the empty root for 0).
///
/// # Errors
///
/// Whatever `src` fails with for a subtree it cannot give.
pub fn root<S: Subtrees>(src: &mut S, size: u64) -> Result<Hash, S::Error> {
    if size == 0 {
        return Ok(empty_root());
    }
    range_hash(src, 0, size)
}

/// The inclusion proof of leaf `index` in the tree of `size` leaves (RFC 6962 §2.1.1,
/// `PATH`), the sibling nearest the leaf first. `index < size`.
///
/// # Errors
///
/// Whatever `src` fails with for a subtree it cannot give.
pub fn inclusion_proof<S: Subtrees>(
    src: &mut S,
    index: u64,
    size: u64,
) -> Result<Vec<Hash>, S::Error> {
    let mut proof = Vec::new();
    path(src, index, 0, size, &mut proof)?;
    Ok(proof)
}

fn path<S: Subtrees>(
    src: &mut S,
    m: u64,
    lo: u64,
    hi: u64,
    out: &mut Vec<Hash>,
) -> Result<(), S::Error> {
    let n = hi - lo;
    if n <= 1 {
        return Ok(());
    }
    let k = split(n);
    if m < k {
        path(src, m, lo, lo + k, out)?;
        out.push(range_hash(src, lo + k, hi)?);
    } else {
        path(src, m - k, lo + k, hi, out)?;
        out.push(range_hash(src, lo, lo + k)?);
    }
    Ok(())
}

/// The consistency proof that the tree of `old` leaves is a prefix of the tree of `new`
/// leaves (RFC 6962 §2.1.2, `PROOF`). `1 ≤ old ≤ new`; empty when they are equal.
///
/// # Errors
///
/// Whatever `src` fails with for a subtree it cannot give.
pub fn consistency_proof<S: Subtrees>(
    src: &mut S,
    old: u64,
    new: u64,
) -> Result<Vec<Hash>, S::Error> {
    let mut proof = Vec::new();
    if old < new {
        subproof(src, old, 0, new, true, &mut proof)?;
    }
    Ok(proof)
}

fn subproof<S: Subtrees>(
    src: &mut S,
    m: u64,
    lo: u64,
    hi: u64,
    whole: bool,
    out: &mut Vec<Hash>,
) -> Result<(), S::Error> {
    let n = hi - lo;
    if m == n {
        if !whole {
            out.push(range_hash(src, lo, hi)?);
        }
        return Ok(());
    }
    let k = split(n);
    if m <= k {
        subproof(src, m, lo, lo + k, whole, out)?;
        out.push(range_hash(src, lo + k, hi)?);
    } else {
        subproof(src, m - k, lo + k, hi, false, out)?;
        out.push(range_hash(src, lo, lo + k)?);
    }
    Ok(())
}

/// Whether `proof` shows that `leaf` (a leaf hash) is leaf `index` of the tree of `size`
/// leaves whose root is `root` (RFC 9162 §2.1.3.2).
pub fn verify_inclusion(index: u64, size: u64, leaf: &Hash, proof: &[Hash], root: &Hash) -> bool {
    if index >= size {
        return false;
    }
    let (mut f, mut s) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if s == 0 {
            return false;
        }
        if f & 1 == 1 || f == s {
            r = node_hash(p, &r);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        f >>= 1;
        s >>= 1;
    }
    s == 0 && r == *root
}

/// Whether `proof` shows that the tree of `old` leaves with root `old_root` is a prefix
/// of the tree of `new` leaves with root `new_root` (RFC 9162 §2.1.4.2). `old` must be
/// at least 1.
pub fn verify_consistency(
    old: u64,
    new: u64,
    old_root: &Hash,
    new_root: &Hash,
    proof: &[Hash],
) -> bool {
    if old == 0 || old > new {
        return false;
    }
    if old == new {
        return proof.is_empty() && old_root == new_root;
    }
    let mut path: Vec<Hash> = Vec::with_capacity(proof.len() + 1);
    if old.is_power_of_two() {
        path.push(*old_root);
    }
    path.extend_from_slice(proof);
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    let (mut f, mut s) = (old - 1, new - 1);
    while f & 1 == 1 {
        f >>= 1;
        s >>= 1;
    }
    let (mut fr, mut sr) = (*first, *first);
    for c in rest {
        if s == 0 {
            return false;
        }
        if f & 1 == 1 || f == s {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            sr = node_hash(&sr, c);
        }
        f >>= 1;
        s >>= 1;
    }
    fr == *old_root && sr == *new_root && s == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leaves in memory: the reference the tile store is compared with.
    struct Mem(Vec<Hash>);

    impl Subtrees for Mem {
        type Error = ();
        fn perfect(&mut self, start: u64, height: u32) -> Result<Hash, ()> {
            let (a, n) = (start as usize, 1usize << height);
            Ok(perfect_root(&self.0[a..a + n]))
        }
    }

    /// RFC 6962's recursive definition, written out directly.
    fn mth(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => empty_root(),
            1 => leaves[0],
            n => {
                let k = split(n as u64) as usize;
                node_hash(&mth(&leaves[..k]), &mth(&leaves[k..]))
            }
        }
    }

    fn leaves(n: usize) -> Vec<Hash> {
        (0..n)
            .map(|i| leaf_hash(format!("leaf {i}").as_bytes()))
            .collect()
    }

    #[test]
    fn the_empty_root_and_a_known_vector() {
        assert_eq!(
            hex::encode(empty_root()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        // RFC 6962's leaf hash of the empty string.
        assert_eq!(
            hex::encode(leaf_hash(b"")),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        );
    }

    #[test]
    fn roots_and_every_proof_check_out_for_every_size_up_to_70() {
        for n in 1..=70u64 {
            let l = leaves(n as usize);
            let mut src = Mem(l.clone());
            let r = root(&mut src, n).unwrap();
            assert_eq!(r, mth(&l), "root of {n}");
            for i in 0..n {
                let p = inclusion_proof(&mut src, i, n).unwrap();
                assert!(verify_inclusion(i, n, &l[i as usize], &p, &r), "{i} of {n}");
                assert!(!verify_inclusion(i, n, &leaf_hash(b"other"), &p, &r));
                if let Some(first) = p.first() {
                    let mut bad = p.clone();
                    bad[0] = node_hash(first, first);
                    assert!(!verify_inclusion(i, n, &l[i as usize], &bad, &r));
                }
            }
            for m in 1..=n {
                let old = mth(&l[..m as usize]);
                let p = consistency_proof(&mut src, m, n).unwrap();
                assert!(verify_consistency(m, n, &old, &r, &p), "{m} to {n}");
                if m < n {
                    assert!(!verify_consistency(m, n, &leaf_hash(b"x"), &r, &p));
                    let mut bad = p.clone();
                    bad.pop();
                    assert!(
                        !verify_consistency(m, n, &old, &r, &bad),
                        "{m} to {n}, short"
                    );
                }
            }
        }
    }
}
