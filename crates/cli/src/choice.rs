//! Which devices `--device` names: one, a list or all of a backend's
//! ([`DeviceChoice`], [`pick_device`]), and how a several-device run orders
//! them within a frame ([`DeviceOrder`]).

use crate::cli::{Backend, MAX_LISTED_DEVICES};
use crate::error::{CliError, CliResult};
use crate::stdio;

/// What `--device` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceChoice {
    /// No `--device`: the backend's default device.
    Default,
    /// `--device N`.
    One(usize),
    /// `--device all`: every device of the backend.
    All,
    /// `--device N,M,...`: these devices, in this order, each once.
    List(Vec<usize>),
}

impl DeviceChoice {
    /// Parses `--device`'s value: an index, `all`, or at most
    /// [`MAX_LISTED_DEVICES`] indices separated by commas, each given once.
    pub fn parse(value: Option<&str>) -> CliResult<Self> {
        let Some(v) = value else {
            return Ok(Self::Default);
        };
        if v == "all" {
            return Ok(Self::All);
        }
        let shown = stdio::text(v);
        let bad = || {
            CliError::Usage(format!(
                "--device {shown}: expected a device index, indices separated by commas (0,1) or `all`"
            ))
        };
        let count = v.split(',').count();
        if count > MAX_LISTED_DEVICES {
            return Err(CliError::Usage(format!(
                "--device: {count} indices: at most {MAX_LISTED_DEVICES} may be listed \
                 (each device once)"
            )));
        }
        let mut list: Vec<usize> = Vec::new();
        for part in v.split(',') {
            let i: usize = part.trim().parse().map_err(|_| bad())?;
            if list.contains(&i) {
                return Err(CliError::Usage(format!(
                    "--device {shown}: device {i} is given twice"
                )));
            }
            list.push(i);
        }
        match list.as_slice() {
            [i] if !v.contains(',') => Ok(Self::One(*i)),
            _ => Ok(Self::List(list)),
        }
    }

    /// Whether it names several devices (`all` or a list), so that the run
    /// is a several-device run, whatever the count found.
    pub fn is_several(&self) -> bool {
        matches!(self, Self::All | Self::List(_))
    }

    /// The single device asked for (`None`: the default); `None` too for a
    /// several-device choice, which [`DeviceChoice::indices`] resolves.
    pub fn single(&self) -> Option<usize> {
        match self {
            Self::One(i) => Some(*i),
            _ => None,
        }
    }

    /// The device indices of a several-device choice among `count` devices
    /// of `backend`: a usage error for an index that does not exist, or for
    /// `all` when there are none.
    pub fn indices(&self, backend: Backend, count: usize) -> CliResult<Vec<usize>> {
        match self {
            Self::All if count == 0 => Err(CliError::Usage(format!(
                "--device all: there are no {}, see `{}`",
                backend.devices_found(),
                backend.devices_command()
            ))),
            Self::All => Ok((0..count).collect()),
            Self::List(list) => list
                .iter()
                .map(|&i| pick_device(backend, Some(i), count, None))
                .collect(),
            Self::Default | Self::One(_) => Err(CliError::Failure(
                "internal: a single device is not a list of devices".into(),
            )),
        }
    }
}

/// How a several-device run orders its devices within a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceOrder {
    /// Every device submits, then the host waits for each.
    Together,
    /// Each device in turn, submitted once the host has seen the previous
    /// device's frame complete (`--chain`).
    Chain,
}

impl DeviceOrder {
    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Self::Together => "together",
            Self::Chain => "chain",
        }
    }
}

/// The device `--device` names among `count` devices of `backend` (or,
/// without it, the `default` one): a usage error naming the indices there
/// are for one that does not exist.
pub(crate) fn pick_device(
    backend: Backend,
    device: Option<usize>,
    count: usize,
    default: Option<usize>,
) -> CliResult<usize> {
    let noun = backend.device_noun();
    match device {
        Some(i) if i < count => Ok(i),
        Some(i) => {
            let there = match count {
                0 => format!("there are no {}", backend.devices_found()),
                1 => format!("there is 1 {noun} (index 0)"),
                n => format!("there are {n} {noun}s (indices 0 to {})", n - 1),
            };
            Err(CliError::Usage(format!(
                "--device {i}: no such {noun}; {there}, see `{}`",
                backend.devices_command()
            )))
        }
        None => default.ok_or_else(|| {
            CliError::Failure(format!(
                "no {} found; {}",
                backend.devices_found(),
                backend.install_hint()
            ))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_choices_parse() {
        assert_eq!(DeviceChoice::parse(None).ok(), Some(DeviceChoice::Default));
        assert_eq!(
            DeviceChoice::parse(Some("3")).ok(),
            Some(DeviceChoice::One(3))
        );
        assert_eq!(
            DeviceChoice::parse(Some("all")).ok(),
            Some(DeviceChoice::All)
        );
        assert_eq!(
            DeviceChoice::parse(Some("1,0")).ok(),
            Some(DeviceChoice::List(vec![1, 0]))
        );
        assert_eq!(
            DeviceChoice::parse(Some("1,")).map_err(|e| e.to_string()),
            Err(
                "--device 1,: expected a device index, indices separated by commas (0,1) or `all`"
                    .into()
            )
        );
        let e = DeviceChoice::parse(Some("0,0")).expect_err("twice");
        assert_eq!(e.exit_code(), 2);
        assert_eq!(e.to_string(), "--device 0,0: device 0 is given twice");
        assert!(DeviceChoice::parse(Some("x")).is_err());
        assert!(DeviceChoice::parse(Some("-1")).is_err());
    }

    #[test]
    fn device_lists_resolve_against_the_devices_there_are() {
        let all = DeviceChoice::All;
        assert_eq!(all.indices(Backend::Vulkan, 2).ok(), Some(vec![0, 1]));
        let e = all.indices(Backend::Vulkan, 0).expect_err("none");
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "--device all: there are no Vulkan 1.3 devices, see `gpu-counters devices`"
        );
        let list = DeviceChoice::List(vec![0, 7]);
        let e = list.indices(Backend::Cuda, 2).expect_err("out of range");
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "--device 7: no such CUDA device; there are 2 CUDA devices (indices 0 to 1), \
             see `gpu-counters devices --backend cuda`"
        );
        assert_eq!(
            DeviceChoice::List(vec![1, 0])
                .indices(Backend::Vulkan, 2)
                .ok(),
            Some(vec![1, 0])
        );
    }

    #[test]
    fn device_indices_name_their_backend() {
        assert_eq!(
            pick_device(Backend::Wgpu, Some(1), 2, Some(0)).ok(),
            Some(1)
        );
        assert_eq!(pick_device(Backend::Wgpu, None, 2, Some(1)).ok(), Some(1));
        let e = pick_device(Backend::Wgpu, Some(2), 2, Some(0)).expect_err("no such adapter");
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "--device 2: no such wgpu adapter; there are 2 wgpu adapters (indices 0 to 1), \
             see `gpu-counters devices --backend wgpu`"
        );
        let e = pick_device(Backend::Vulkan, Some(0), 0, None).expect_err("no device");
        assert_eq!(
            e.to_string(),
            "--device 0: no such device; there are no Vulkan 1.3 devices, see `gpu-counters devices`"
        );
        let e = pick_device(Backend::Wgpu, None, 0, None).expect_err("no adapter");
        assert_eq!(e.exit_code(), 1);
    }

    #[test]
    fn cuda_device_indices_are_ordinals() {
        let e = pick_device(Backend::Cuda, Some(3), 1, Some(0)).expect_err("no such device");
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "--device 3: no such CUDA device; there is 1 CUDA device (index 0), \
             see `gpu-counters devices --backend cuda`"
        );
        let e = pick_device(Backend::Cuda, None, 0, None).expect_err("no device");
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().starts_with("no CUDA devices found; "), "{e}");
        assert!(!e.to_string().contains("lavapipe"), "{e}");
    }
}
