//! Shards: which lines of the file this process runs (`--shard I/N`, or `--shards N`
//! with a Kubernetes Indexed Job's `JOB_COMPLETION_INDEX`).

/// One shard of N: the lines `n` (from 0) with `n % count == index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shard {
    index: u32,
    count: u32,
}

impl Shard {
    fn whole() -> Self {
        Shard { index: 0, count: 1 }
    }

    /// Whether the line with this number (from 1, as error messages count) is ours.
    pub(super) fn owns(self, line_number: usize) -> bool {
        (line_number - 1) % self.count as usize == self.index as usize
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

pub(super) fn parse_shard(text: &str) -> Result<Shard, String> {
    let (i, n) = text
        .split_once('/')
        .ok_or_else(|| "expected I/N, for example 0/4".to_string())?;
    let index: u32 = i
        .trim()
        .parse()
        .map_err(|_| format!("`{i}` is not a shard number"))?;
    let count: u32 = n
        .trim()
        .parse()
        .map_err(|_| format!("`{n}` is not a number of shards"))?;
    if count == 0 || index >= count {
        return Err(format!(
            "shard {index} of {count} does not exist: I must be at least 0 and below N"
        ));
    }
    Ok(Shard { index, count })
}

/// Which shard runs: `--shard`, else `--shards` with `JOB_COMPLETION_INDEX`, else all.
pub(super) fn choose_shard(
    shard: Option<Shard>,
    shards: Option<u32>,
    job_index: Option<&str>,
) -> Result<Shard, String> {
    match (shard, shards) {
        (Some(shard), _) => Ok(shard),
        (None, Some(count)) => {
            let text = job_index.ok_or_else(|| {
                "--shards needs JOB_COMPLETION_INDEX (set by a Kubernetes Indexed Job), or give \
                 --shard I/N"
                    .to_string()
            })?;
            let index: u32 = text
                .trim()
                .parse()
                .map_err(|_| format!("JOB_COMPLETION_INDEX `{text}` is not a whole number"))?;
            if index >= count {
                return Err(format!(
                    "JOB_COMPLETION_INDEX {index} is not below --shards {count}"
                ));
            }
            Ok(Shard { index, count })
        }
        (None, None) => Ok(Shard::whole()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_every_line_exactly_once() {
        for count in 1..6u32 {
            for line in 1..50usize {
                let owners = (0..count)
                    .filter(|&index| Shard { index, count }.owns(line))
                    .count();
                assert_eq!(owners, 1, "line {line} of {count} shards");
            }
        }
    }

    #[test]
    fn shard_flags_parse_and_refuse_what_does_not_exist() {
        assert_eq!(parse_shard("2/4"), Ok(Shard { index: 2, count: 4 }));
        assert!(parse_shard("4/4").is_err());
        assert!(parse_shard("0/0").is_err());
        assert!(parse_shard("1").is_err());
        assert!(parse_shard("a/2").is_err());
    }
}
