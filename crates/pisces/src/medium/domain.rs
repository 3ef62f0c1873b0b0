//! The persistence domain: which part of the machine a power failure cannot erase.
//!
//! * [`PersistenceDomain::Adr`] (asynchronous DRAM refresh): the memory controller's
//!   write queues are flushed on power loss, the CPU caches are not. A store is
//!   durable once its cache line is written back (`clwb`) and the write-back is
//!   completed by a fence. This is what every engine was written for.
//! * [`PersistenceDomain::Eadr`] (extended ADR, and CXL's global persistent flush):
//!   the CPU caches are flushed on power loss too, so a store is durable once it is
//!   visible to other processors. A cache-line write-back is pure cost, and the
//!   medium's [`flush`](super::Medium::flush) does nothing. The fence stays: stores
//!   still in a core's store buffer are not yet visible (an `sfence` drains them in
//!   order), and non-temporal stores ([`write_lines`](super::Medium::write_lines)) sit
//!   in write-combining buffers outside the domain until the fence completes them.
//! * [`PersistenceDomain::PageCache`]: the file medium, where nothing is durable until
//!   `msync` writes the pages back; its flush records the pages for the fence.
//!
//! Because every engine reaches persistent memory only through the medium's `flush`
//! and `fence`, the domain is honoured by all of them at once: an engine issues the
//! same calls under both domains, and under eADR its flushes cost nothing.
//!
//! # Detection
//! Linux reports the domain per NVDIMM region in
//! `/sys/bus/nd/devices/region*/persistence_domain`: `cpu_cache` (eADR),
//! `memory_controller` (ADR), or no such file (an older kernel, or a platform that
//! promises neither; treated as ADR). A DAX pool file is matched to its region through
//! the device number of its file system: `/sys/dev/block/MAJ:MIN` links to the block
//! device's directory, which lies under the region's (`.../ndbus0/region0/
//! namespace0.0/block/pmem0`). A file system on any other device (a device-mapper
//! volume, no NVDIMM at all) has no region and is treated as ADR, the safe default:
//! flushing where it was not needed costs time, not data.
//!
//! The domain is not recorded in the pool: it is a property of the platform the pool
//! is opened on, and a pool moved (or its DIMMs moved) to an ADR machine must flush
//! again. It is decided at every open.

use std::fs;
use std::path::{Path, PathBuf};

/// Where a store becomes durable (see the [module documentation](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PersistenceDomain {
    /// Durable after cache-line write-back and a fence (the memory controller is in the
    /// domain, the caches are not).
    #[default]
    Adr,
    /// Durable once visible (the caches are in the domain): write-back is skipped, the
    /// fence stays.
    Eadr,
    /// Durable after `msync` (the file medium).
    PageCache,
}

impl PersistenceDomain {
    /// A short, stable name: `adr`, `eadr`, `page-cache`.
    pub fn name(self) -> &'static str {
        match self {
            PersistenceDomain::Adr => "adr",
            PersistenceDomain::Eadr => "eadr",
            PersistenceDomain::PageCache => "page-cache",
        }
    }

    /// The domain called `name` (`adr`, `eadr`, `page-cache`).
    pub fn from_name(name: &str) -> Option<PersistenceDomain> {
        match name {
            "adr" => Some(PersistenceDomain::Adr),
            "eadr" => Some(PersistenceDomain::Eadr),
            "page-cache" => Some(PersistenceDomain::PageCache),
            _ => None,
        }
    }

    /// True when a cache-line write-back is needed for durability (`adr`, and the
    /// file medium, whose flush records pages for `msync`).
    pub fn needs_flush(self) -> bool {
        self != PersistenceDomain::Eadr
    }
}

impl std::fmt::Display for PersistenceDomain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the platform says about the persistence domain of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Detected {
    /// The domain to use: the region's, or ADR when the platform says nothing.
    pub domain: PersistenceDomain,
    /// The NVDIMM region backing the file (`region0`), if one was found.
    pub region: Option<String>,
    /// How the domain was decided, for `pisces info` and error messages.
    pub reason: String,
}

/// Reads the persistence domain from a sysfs tree. [`SysfsProbe::default`] reads
/// `/sys`; a test gives the root of a directory laid out like it.
#[derive(Clone, Debug)]
pub struct SysfsProbe {
    root: PathBuf,
}

impl Default for SysfsProbe {
    fn default() -> Self {
        SysfsProbe {
            root: PathBuf::from("/sys"),
        }
    }
}

impl SysfsProbe {
    /// A probe of the sysfs tree at `root` (it reads `root/dev/block/MAJ:MIN` and
    /// `root/bus/nd/devices/region*`).
    pub fn at(root: impl Into<PathBuf>) -> SysfsProbe {
        SysfsProbe { root: root.into() }
    }

    /// The domain of the file system holding `path` (the file itself, or for a file
    /// not created yet, its directory).
    pub fn detect_for_path(&self, path: &Path) -> Detected {
        use std::os::unix::fs::MetadataExt;
        let meta = fs::metadata(path).or_else(|e| match path.parent() {
            Some(dir) if e.kind() == std::io::ErrorKind::NotFound => {
                fs::metadata(if dir.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    dir
                })
            }
            _ => Err(e),
        });
        match meta {
            Ok(m) => self.detect_for_device(major(m.dev()), minor(m.dev())),
            Err(e) => Detected {
                domain: PersistenceDomain::Adr,
                region: None,
                reason: format!("{}: {e}; assuming adr", path.display()),
            },
        }
    }

    /// The domain of the block device `major:minor`.
    pub fn detect_for_device(&self, major: u64, minor: u64) -> Detected {
        let link = self.root.join(format!("dev/block/{major}:{minor}"));
        let Some(region) = self.region_of(&link) else {
            return Detected {
                domain: PersistenceDomain::Adr,
                region: None,
                reason: format!("device {major}:{minor} is not on an NVDIMM region; assuming adr"),
            };
        };
        self.region_domain(&region)
    }

    /// The NVDIMM region whose directory holds the device directory `link` points to.
    fn region_of(&self, link: &Path) -> Option<String> {
        let dir = fs::canonicalize(link).ok()?;
        dir.components().rev().find_map(|c| {
            let name = c.as_os_str().to_str()?;
            let n = name.strip_prefix("region")?;
            (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then(|| name.to_string())
        })
    }

    /// The domain `region` reports.
    pub fn region_domain(&self, region: &str) -> Detected {
        let file = self
            .root
            .join("bus/nd/devices")
            .join(region)
            .join("persistence_domain");
        let (domain, reason) = match fs::read_to_string(&file) {
            Ok(s) => match s.trim() {
                "cpu_cache" => (
                    PersistenceDomain::Eadr,
                    format!("{region} reports cpu_cache"),
                ),
                "memory_controller" => (
                    PersistenceDomain::Adr,
                    format!("{region} reports memory_controller"),
                ),
                other => (
                    PersistenceDomain::Adr,
                    format!("{region} reports `{other}`; assuming adr"),
                ),
            },
            Err(_) => (
                PersistenceDomain::Adr,
                format!("{region} reports no persistence domain; assuming adr"),
            ),
        };
        Detected {
            domain,
            region: Some(region.to_string()),
            reason,
        }
    }

    /// The NVDIMMs (`nmem0`, ...) mapped by `region` (its `mappingN` files read
    /// `nmem0,offset,length,position`).
    pub fn region_dimms(&self, region: &str) -> Vec<String> {
        let dir = self.root.join("bus/nd/devices").join(region);
        let mut dimms = Vec::new();
        for i in 0.. {
            let Ok(s) = fs::read_to_string(dir.join(format!("mapping{i}"))) else {
                break;
            };
            if let Some(d) = s.trim().split(',').next().filter(|d| !d.is_empty()) {
                dimms.push(d.to_string());
            }
        }
        dimms
    }

    /// The unsafe-shutdown count summed over the NVDIMMs of the region holding `file`'s
    /// file system; `None` when there is no region or none of its DIMMs exposes one.
    pub fn dirty_shutdowns_of_file(&self, file: &std::fs::File) -> Option<u64> {
        use std::os::unix::fs::MetadataExt;
        let dev = file.metadata().ok()?.dev();
        let region = self.detect_for_device(major(dev), minor(dev)).region?;
        let counts = self.dirty_shutdowns(&region);
        (!counts.is_empty()).then(|| counts.iter().map(|(_, n)| n).sum())
    }

    /// The unsafe-shutdown count of each NVDIMM of `region` that exposes one
    /// (`nmemN/nfit/dirty_shutdown`); empty when none does.
    pub fn dirty_shutdowns(&self, region: &str) -> Vec<(String, u64)> {
        self.region_dimms(region)
            .into_iter()
            .filter_map(|d| {
                let f = self
                    .root
                    .join("bus/nd/devices")
                    .join(&d)
                    .join("nfit/dirty_shutdown");
                let n = fs::read_to_string(f).ok()?.trim().parse().ok()?;
                Some((d, n))
            })
            .collect()
    }
}

/// glibc's `gnu_dev_major`.
fn major(dev: u64) -> u64 {
    ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff)
}

/// glibc's `gnu_dev_minor`.
fn minor(dev: u64) -> u64 {
    (dev & 0xff) | ((dev >> 12) & !0xff)
}

/// What a configuration asks of the domain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DomainRequest {
    /// The domain asked for; `None`: the platform's (detected on DAX, ADR on DRAM,
    /// the page cache on a plain file).
    pub domain: Option<PersistenceDomain>,
    /// Allow `eadr` where detection says otherwise (the caller knows better than the
    /// firmware tables, e.g. a platform whose kernel does not report the domain).
    pub trust: bool,
}

/// The domain a pool runs under on a medium of `kind`, and a warning when the caller
/// forced eADR against what the platform reported. `detected` is the platform's
/// answer for a DAX file (`None` for other media).
pub(crate) fn resolve(
    kind: super::MediumKind,
    detected: Option<&Detected>,
    req: DomainRequest,
) -> crate::Result<(PersistenceDomain, Option<String>)> {
    use super::MediumKind;
    use crate::Error;
    match (kind, req.domain) {
        (MediumKind::File, None | Some(PersistenceDomain::PageCache)) => {
            Ok((PersistenceDomain::PageCache, None))
        }
        (MediumKind::File, Some(d)) => Err(Error::invalid_config(format!(
            "the file medium is durable through msync (domain page-cache), not {d}; \
             use the dax or the dram medium"
        ))),
        (_, Some(PersistenceDomain::PageCache)) => Err(Error::invalid_config(format!(
            "the page-cache domain is the file medium's; the {} medium is adr or eadr",
            kind.name()
        ))),
        // DRAM: an emulation either way; the domain is what is measured.
        (MediumKind::Dram { .. }, d) => Ok((d.unwrap_or_default(), None)),
        (MediumKind::Dax, d) => {
            let found = detected.map_or(PersistenceDomain::Adr, |x| x.domain);
            let why = detected.map_or_else(|| "not probed".to_string(), |x| x.reason.clone());
            match d {
                None => Ok((found, None)),
                Some(PersistenceDomain::Eadr) if found != PersistenceDomain::Eadr => {
                    if req.trust {
                        Ok((
                            PersistenceDomain::Eadr,
                            Some(format!(
                                "eadr forced against the platform ({why}): cache-line write-backs \
                                 are skipped, and a power failure may lose committed transactions \
                                 if the caches are not in fact persistent"
                            )),
                        ))
                    } else {
                        Err(Error::invalid_config(format!(
                            "eadr asked for, but the platform does not report it ({why}); \
                             Config::trust_persistence_domain (pisces: --trust-domain) forces it"
                        )))
                    }
                }
                Some(d) => Ok((d, None)),
            }
        }
        (MediumKind::Custom, d) => Ok((d.unwrap_or_default(), None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A sysfs tree with one device `259:0` under `region0` (whose
    /// `persistence_domain` reads `domain`, or is absent) and one device `8:1` on no
    /// region.
    fn tree(domain: Option<&str>) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let region = r.join("devices/LNXSYSTM:00/ndbus0/region0");
        let dev = region.join("namespace0.0/block/pmem0");
        fs::create_dir_all(&dev).unwrap();
        let disk = r.join("devices/pci0000:00/ata1/block/sda/sda1");
        fs::create_dir_all(&disk).unwrap();
        fs::create_dir_all(r.join("dev/block")).unwrap();
        fs::create_dir_all(r.join("bus/nd/devices")).unwrap();
        symlink(&dev, r.join("dev/block/259:0")).unwrap();
        symlink(&disk, r.join("dev/block/8:1")).unwrap();
        symlink(&region, r.join("bus/nd/devices/region0")).unwrap();
        if let Some(d) = domain {
            fs::write(region.join("persistence_domain"), format!("{d}\n")).unwrap();
        }
        fs::write(region.join("mapping0"), "nmem0,0,1073741824,0\n").unwrap();
        fs::write(region.join("mapping1"), "nmem1,0,1073741824,1\n").unwrap();
        for (d, n) in [("nmem0", Some(3)), ("nmem1", None)] {
            let nfit = r.join("bus/nd/devices").join(d).join("nfit");
            fs::create_dir_all(&nfit).unwrap();
            if let Some(n) = n {
                fs::write(nfit.join("dirty_shutdown"), format!("{n}\n")).unwrap();
            }
        }
        t
    }

    #[test]
    fn a_region_reporting_cpu_cache_is_eadr() {
        let t = tree(Some("cpu_cache"));
        let d = SysfsProbe::at(t.path()).detect_for_device(259, 0);
        assert_eq!(d.domain, PersistenceDomain::Eadr);
        assert_eq!(d.region.as_deref(), Some("region0"));
    }

    #[test]
    fn a_region_reporting_memory_controller_is_adr() {
        let t = tree(Some("memory_controller"));
        let d = SysfsProbe::at(t.path()).detect_for_device(259, 0);
        assert_eq!(d.domain, PersistenceDomain::Adr);
        assert!(d.reason.contains("memory_controller"), "{}", d.reason);
    }

    #[test]
    fn a_region_without_a_persistence_domain_file_is_adr() {
        let t = tree(None);
        let d = SysfsProbe::at(t.path()).detect_for_device(259, 0);
        assert_eq!(d.domain, PersistenceDomain::Adr);
        assert_eq!(d.region.as_deref(), Some("region0"));
        assert!(d.reason.contains("no persistence domain"), "{}", d.reason);
    }

    #[test]
    fn a_device_on_no_region_is_adr() {
        let t = tree(Some("cpu_cache"));
        let p = SysfsProbe::at(t.path());
        for (ma, mi) in [(8, 1), (7, 7)] {
            let d = p.detect_for_device(ma, mi);
            assert_eq!((d.domain, d.region), (PersistenceDomain::Adr, None));
        }
        // A path on this machine's file systems (no NVDIMM in the test tree).
        let here = p.detect_for_path(Path::new("/dev/shm/not-created-yet"));
        assert_eq!(here.domain, PersistenceDomain::Adr);
    }

    #[test]
    fn the_dimms_of_a_region_and_their_unsafe_shutdown_counts() {
        let t = tree(Some("cpu_cache"));
        let p = SysfsProbe::at(t.path());
        assert_eq!(p.region_dimms("region0"), vec!["nmem0", "nmem1"]);
        assert_eq!(p.dirty_shutdowns("region0"), vec![("nmem0".to_string(), 3)]);
        assert!(p.dirty_shutdowns("region9").is_empty());
    }

    #[test]
    fn forcing_eadr_against_the_platform_needs_trust_and_warns() {
        use super::super::MediumKind;
        let adr = Detected {
            domain: PersistenceDomain::Adr,
            region: Some("region0".into()),
            reason: "region0 reports memory_controller".into(),
        };
        let eadr = DomainRequest {
            domain: Some(PersistenceDomain::Eadr),
            trust: false,
        };
        assert!(resolve(MediumKind::Dax, Some(&adr), eadr).is_err());
        let (d, w) = resolve(
            MediumKind::Dax,
            Some(&adr),
            DomainRequest {
                trust: true,
                ..eadr
            },
        )
        .unwrap();
        assert_eq!(d, PersistenceDomain::Eadr);
        assert!(w.unwrap().contains("memory_controller"));
        // Detection alone, and adr forced on an eadr platform: no warning.
        let cpu = Detected {
            domain: PersistenceDomain::Eadr,
            ..adr.clone()
        };
        assert_eq!(
            resolve(MediumKind::Dax, Some(&cpu), DomainRequest::default()).unwrap(),
            (PersistenceDomain::Eadr, None)
        );
        let force_adr = DomainRequest {
            domain: Some(PersistenceDomain::Adr),
            trust: false,
        };
        assert_eq!(
            resolve(MediumKind::Dax, Some(&cpu), force_adr).unwrap(),
            (PersistenceDomain::Adr, None)
        );
        // The emulated DRAM medium takes either; the file medium neither.
        assert_eq!(
            resolve(MediumKind::DRAM, None, eadr).unwrap(),
            (PersistenceDomain::Eadr, None)
        );
        assert!(resolve(MediumKind::File, None, eadr).is_err());
        assert_eq!(
            resolve(MediumKind::File, None, DomainRequest::default())
                .unwrap()
                .0,
            PersistenceDomain::PageCache
        );
    }
}
