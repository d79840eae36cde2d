//! The partition of a keyed record, as Kafka's Java producer chooses it: murmur2 of the key
//! bytes, made positive, modulo the partition count (`BuiltInPartitioner.partitionForKey`,
//! `org.apache.kafka.common.utils.Utils.murmur2`). Producing with the same function keeps one
//! key in one partition whichever client wrote it.

/// Kafka's 32-bit murmur2 of `data` (seed `0x9747b28c`), as `Utils.murmur2` returns it.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    // Kafka takes the length as a Java int; records larger than 2 GiB do not exist.
    let mut h = SEED ^ (data.len() as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, byte) in tail.iter().enumerate().rev() {
            h ^= u32::from(*byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition among `partitions` (at least 1) for a record with `key`:
/// `(murmur2(key) & 0x7fffffff) % partitions`.
pub fn partition_for_key(key: &[u8], partitions: usize) -> i32 {
    let positive = (murmur2(key) & 0x7fff_ffff) as u32;
    // A partition count fits an i32 (Kafka numbers partitions with one).
    (positive % (partitions.max(1) as u32)) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_kafkas_murmur2() {
        // Expected values from Kafka's UtilsTest.testMurmur2 (clients, Apache Kafka).
        for (input, expected) in [
            ("21", -973_932_308),
            ("foobar", -790_332_482),
            ("a-little-bit-long-string", -985_981_536),
            ("a-little-bit-longer-string", -1_486_304_829),
            (
                "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            ("abc", 479_470_107),
        ] {
            assert_eq!(murmur2(input.as_bytes()), expected, "{input}");
        }
    }

    #[test]
    fn a_key_always_lands_in_one_partition_in_range() {
        for key in ["order:1", "order:2", "", "customer:ü"] {
            let p = partition_for_key(key.as_bytes(), 6);
            assert!((0..6).contains(&p));
            assert_eq!(partition_for_key(key.as_bytes(), 6), p);
        }
        assert_eq!(partition_for_key(b"anything", 1), 0);
    }
}
