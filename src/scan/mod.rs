//! Stage 1: one pass over the bytes that builds the structural index and
//! checks everything that needs every byte (UTF-8, control characters in
//! strings, unterminated strings). See `generic` for the algorithm and
//! [`crate::index`] for what it produces.
//!
//! # Kernels and dispatch
//!
//! Each instruction set is one small file implementing the block trait of
//! `generic`: `scalar` everywhere, `avx2` on x86 CPUs with AVX2 and
//! PCLMULQDQ, `avx512` on x86 CPUs with AVX-512F, AVX-512BW, AVX-512
//! VBMI and VBMI2 and PCLMULQDQ (Ice Lake and later, Zen 4 and later;
//! `avx512.rs` says why VBMI2), the x86 kernels also requiring POPCNT and BMI1, which
//! every CPU with those has; `neon` on every aarch64 CPU (NEON is part of
//! the architecture; the carry-less multiply, from the optional `aes`
//! extension, is used when present). The kernel is chosen once, at the
//! first parse, and cached: the best one the CPU supports, or the one
//! named by the environment variable `QJSON_KERNEL` (`scalar`, `avx2`,
//! `avx512`, `neon`). A name this build does not
//! know, or a kernel this CPU cannot run, is an error
//! ([`ErrorCode::BadKernel`]), never a silent fallback, so a test that
//! forces a kernel is sure to exercise it. [`active_kernel`] names the
//! kernel in use.
//!
//! This module is the only place that asks the CPU what it supports.

mod generic;
mod scalar;
mod utf8;

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod avx2;
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod avx512;
#[cfg(any(target_arch = "x86", target_arch = "x86_64", target_arch = "aarch64"))]
mod classify;
#[cfg(target_arch = "aarch64")]
mod neon;

use core::sync::atomic::{AtomicU8, Ordering};

/// Which bytes of a block a run of backslashes escapes: also what finds
/// the escapes of a string body decoded by blocks
/// (`crate::values::unescape_blocks`, on x86).
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub(crate) use generic::escaped_bits;

use crate::error::{Error, ErrorCode, Result};
use crate::index::Index;

/// A stage-1 implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kernel {
    /// Portable: each block bit-sliced into eight `u64` planes.
    Scalar = 1,
    /// AVX2 + PCLMULQDQ, 64 bytes per step.
    Avx2 = 2,
    /// AVX-512F + AVX-512BW + AVX-512 VBMI and VBMI2 + PCLMULQDQ, 64
    /// bytes per step.
    Avx512 = 3,
    /// NEON (aarch64), 64 bytes per step.
    Neon = 4,
}

impl Kernel {
    /// Every kernel this build contains, best last.
    pub const ALL: [Kernel; 4] = [Kernel::Scalar, Kernel::Avx2, Kernel::Avx512, Kernel::Neon];

    /// The name used by `QJSON_KERNEL` and [`active_kernel`].
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            Kernel::Avx2 => "avx2",
            Kernel::Avx512 => "avx512",
            Kernel::Neon => "neon",
        }
    }

    /// The kernel called `name`, if this build has one.
    pub fn from_name(name: &str) -> Option<Kernel> {
        Kernel::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether this CPU can run the kernel.
    pub fn is_supported(self) -> bool {
        match self {
            Kernel::Scalar => true,
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Kernel::Avx2 => {
                std::is_x86_feature_detected!("avx2")
                    && std::is_x86_feature_detected!("pclmulqdq")
                    && std::is_x86_feature_detected!("popcnt")
                    && std::is_x86_feature_detected!("bmi1")
            }
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Kernel::Avx512 => {
                // AVX2 too, asked for its own bit: the kernel runs the
                // AVX2 kernel's code where that serves (`bmp_run`, and the
                // offset writer under Miri), and a virtual machine may
                // report AVX-512 with AVX2 hidden.
                std::is_x86_feature_detected!("avx2")
                    && std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vbmi")
                    && std::is_x86_feature_detected!("avx512vbmi2")
                    && std::is_x86_feature_detected!("pclmulqdq")
                    && std::is_x86_feature_detected!("popcnt")
                    && std::is_x86_feature_detected!("bmi1")
            }
            #[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
            Kernel::Avx2 | Kernel::Avx512 => false,
            Kernel::Neon => cfg!(target_arch = "aarch64"),
        }
    }

    /// Whether a parse with this kernel runs stage 2 compiled for
    /// x86-64-v3 (`validate::Isa`): with the x86 SIMD kernels, on a CPU
    /// that also has what that build uses beyond their own requirements
    /// (BMI2 and LZCNT: every CPU with AVX2 has them, but a virtual
    /// machine may hide them). Stage 2 follows the kernel so that
    /// `QJSON_KERNEL=scalar` runs portable code throughout and a test that
    /// runs every kernel runs each build of it.
    #[inline]
    pub fn runs_x86_v3(self) -> bool {
        match self {
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Kernel::Avx2 | Kernel::Avx512 => cpu_has_x86_v3(),
            _ => false,
        }
    }

    /// The kernel numbered `v` (its discriminant), if any: one range
    /// check, as every parse asks it of the cached choice.
    #[inline(always)]
    fn from_u8(v: u8) -> Option<Kernel> {
        match v {
            1 => Some(Kernel::Scalar),
            2 => Some(Kernel::Avx2),
            3 => Some(Kernel::Avx512),
            4 => Some(Kernel::Neon),
            _ => None,
        }
    }
}

/// The environment variable that forces a kernel.
pub const KERNEL_ENV: &str = "QJSON_KERNEL";

const UNDECIDED: u8 = 0;
const MISCONFIGURED: u8 = 0xff;
static ACTIVE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// The kernel [`scan`] uses: decided at the first call, then cached.
///
/// Fails with [`ErrorCode::BadKernel`] when `QJSON_KERNEL` names a kernel
/// that does not exist or that this CPU cannot run. The cached choice is
/// read inline (every parse asks); deciding is out of line.
#[inline]
pub fn active_kernel() -> Result<Kernel> {
    match Kernel::from_u8(ACTIVE.load(Ordering::Relaxed)) {
        Some(k) => Ok(k),
        None => decide_active(),
    }
}

/// [`active_kernel`] before the choice is cached, or when it failed.
#[cold]
#[inline(never)]
fn decide_active() -> Result<Kernel> {
    let v = ACTIVE.load(Ordering::Relaxed);
    let decided = if v == UNDECIDED { decide() } else { None };
    // Racing first calls decide the same thing; the last store wins.
    ACTIVE.store(
        decided.map_or(MISCONFIGURED, |k| k as u8),
        Ordering::Relaxed,
    );
    decided.ok_or(Error::new(ErrorCode::BadKernel, 0))
}

fn decide() -> Option<Kernel> {
    decide_for(std::env::var(KERNEL_ENV).ok().as_deref())
}

/// The kernel for a `QJSON_KERNEL` value (`None` or empty: choose).
fn decide_for(forced: Option<&str>) -> Option<Kernel> {
    match forced {
        Some(name) if !name.is_empty() => Kernel::from_name(name).filter(|k| k.is_supported()),
        _ => Kernel::ALL.into_iter().rev().find(|k| k.is_supported()),
    }
}

/// `ask()`, asked once and then kept in `cell` (0 until asked, then 1
/// for no, 2 for yes): for the questions about the CPU that every parse
/// asks.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[inline]
fn cached(cell: &AtomicU8, ask: impl FnOnce() -> bool) -> bool {
    match cell.load(Ordering::Relaxed) {
        0 => {
            let yes = ask();
            cell.store(1 + u8::from(yes), Ordering::Relaxed);
            yes
        }
        v => v == 2,
    }
}

/// [`cpu_has_x86_v3`]'s answer, [`cached`].
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
static X86_V3: AtomicU8 = AtomicU8::new(0);

/// Whether the CPU has every extension stage 2's x86-64-v3 build is
/// compiled with (AVX2, BMI1, BMI2, LZCNT, POPCNT).
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[inline]
fn cpu_has_x86_v3() -> bool {
    cached(&X86_V3, || {
        std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("bmi1")
            && std::is_x86_feature_detected!("bmi2")
            && std::is_x86_feature_detected!("lzcnt")
            && std::is_x86_feature_detected!("popcnt")
    })
}

/// [`avx512_pairs_blocks`]'s answer, [`cached`].
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
static AVX512_PAIRS: AtomicU8 = AtomicU8::new(0);

/// Whether the `avx512` kernel classifies two blocks a turn
/// (`generic::Simd::PAIRS_BLOCKS`): on every CPU but AMD's. Its offsets
/// are written one block late, so one block's write already overlaps the
/// next block's classifying; whether a second block a turn gains more
/// depends on the core. Stage 1 against simdjson's `icelake` on
/// twitter, citm_catalog and canada (`cargo bench --bench core`): on an
/// Intel Xeon (family 6, model 207) 1.04-1.10x paired against
/// 0.93-1.02x one block a turn; on AMD's Zen 5, 0.92, 0.90, 0.90 paired
/// against 0.98, 0.95, 0.94 (docs/benchmarks.md, "Two blocks a turn on
/// Intel, one on AMD"). AMD's Zen 4 is untimed and follows Zen 5.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
fn avx512_pairs_blocks() -> bool {
    #[cfg(target_arch = "x86")]
    use core::arch::x86::__cpuid;
    #[cfg(target_arch = "x86_64")]
    use core::arch::x86_64::__cpuid;
    cached(&AVX512_PAIRS, || {
        // Leaf 0: the vendor's name in EBX, EDX, ECX. (`__cpuid` is safe
        // in today's Rust, unsafe in older ones that rust-version admits.)
        // SAFETY: every CPU with AVX-512, the only one asked, has CPUID.
        #[allow(unused_unsafe)]
        let leaf = unsafe { __cpuid(0) };
        let vendor = [leaf.ebx, leaf.edx, leaf.ecx].map(u32::to_le_bytes);
        vendor != [*b"Auth", *b"enti", *b"cAMD"]
    })
}

/// Inputs must be shorter than this: offsets are `u32`.
pub const MAX_INPUT: usize = u32::MAX as usize;

/// Runs stage 1 over `input` with the active kernel, appending to
/// `index.positions` and `index.escapes` (clear the index first).
pub fn scan(input: &[u8], index: &mut Index) -> Result<()> {
    let kernel = active_kernel()?;
    // SAFETY: active_kernel() only returns kernels this CPU supports (it
    // asked when deciding).
    unsafe { stage1(kernel, input, index) }
}

/// Runs stage 1 with a chosen kernel; [`ErrorCode::BadKernel`] if this CPU
/// cannot run it.
pub fn scan_with(kernel: Kernel, input: &[u8], index: &mut Index) -> Result<()> {
    if !kernel.is_supported() {
        return Err(Error::new(ErrorCode::BadKernel, 0));
    }
    // SAFETY: just checked.
    unsafe { stage1(kernel, input, index) }
}

/// Runs stage 1 with `kernel`: for a caller that has the kernel at hand
/// (`Document`'s loads, which run stage 2 in the build beside it).
///
/// # Safety
/// The CPU supports `kernel` ([`Kernel::is_supported`]).
pub(crate) unsafe fn stage1(kernel: Kernel, input: &[u8], index: &mut Index) -> Result<()> {
    if input.len() >= MAX_INPUT {
        return Err(Error::new(ErrorCode::TooLarge, input.len()));
    }
    // SAFETY: forwarded from the caller.
    unsafe { run_pass(kernel, generic::Stage1 { input, index }) }
        .unwrap_or(Err(Error::new(ErrorCode::BadKernel, 0)))
}

/// Whether `input` is valid UTF-8, by the active kernel's checker: for
/// the eager decoder's long strings, where `core::str::from_utf8` goes a
/// character at a time through text in other scripts. With no usable
/// kernel (a bad `QJSON_KERNEL`, which `scan` reports),
/// `core::str::from_utf8`.
pub fn is_utf8(input: &[u8]) -> bool {
    match active_kernel() {
        // SAFETY: active_kernel() only returns kernels this CPU supports.
        Ok(kernel) => unsafe { run_pass(kernel, generic::Utf8(input)) },
        Err(_) => None,
    }
    .unwrap_or_else(|| core::str::from_utf8(input).is_ok())
}

/// How many bytes at the start of `input` are string content in whole
/// 64-byte blocks (no `"`, `\` or byte below 0x20 in them; a multiple of
/// 64), and whether one of them is 0x80 or more: for the eager decoder's
/// long strings (a base64 image, a long message), which its own search
/// reads 16 bytes at a time. By the active SIMD kernel, four blocks per
/// test through plain ASCII as stage 1 skips strings; 0 with the scalar
/// kernel, whose blocks cost more than that search, or none usable.
pub fn string_content_run(input: &[u8]) -> (usize, bool) {
    match active_kernel() {
        Ok(Kernel::Scalar) | Err(_) => None,
        // SAFETY: active_kernel() only returns kernels this CPU supports.
        Ok(kernel) => unsafe { run_pass(kernel, generic::StringRun(input)) },
    }
    .unwrap_or((0, false))
}

/// Runs `pass` with `kernel`: the one place that maps a kernel to its
/// code; `None` for a kernel of another architecture. The caller vouches
/// for the CPU: asking it again for every text cost a 100-byte document
/// 30 of its 500 stage-1 instructions.
///
/// # Safety
/// The CPU supports `kernel` ([`Kernel::is_supported`]).
unsafe fn run_pass<P: generic::Pass>(kernel: Kernel, pass: P) -> Option<P::Output> {
    // SAFETY: forwarded from the caller.
    unsafe { run_pass_turns(kernel, None, pass) }
}

/// [`run_pass`], `avx512_pairs` saying whether the `avx512` kernel
/// classifies two blocks a turn (`None`: as this CPU runs it, see
/// [`avx512_pairs_blocks`]), so that tests run both ways on any CPU.
///
/// # Safety
/// The CPU supports `kernel` ([`Kernel::is_supported`]).
unsafe fn run_pass_turns<P: generic::Pass>(
    kernel: Kernel,
    #[cfg_attr(
        not(any(target_arch = "x86", target_arch = "x86_64")),
        allow(unused_variables)
    )]
    avx512_pairs: Option<bool>,
    pass: P,
) -> Option<P::Output> {
    match kernel {
        Kernel::Scalar => {
            let simd = scalar::Scalar::new(pass.input());
            // SAFETY: the scalar kernel uses no optional instructions.
            Some(unsafe { pass.run(simd) })
        }
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        Kernel::Avx2 => {
            // SAFETY: the caller vouches for the features.
            let token = unsafe { avx2::Avx2::new_unchecked() };
            Some(avx2::run(token, pass))
        }
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        Kernel::Avx512 => {
            // SAFETY: the caller vouches for the features.
            let token = unsafe { avx512::Avx512::new_unchecked() };
            let pairs = avx512_pairs.unwrap_or_else(avx512_pairs_blocks);
            Some(avx512::run(token, pairs, pass))
        }
        #[cfg(target_arch = "aarch64")]
        Kernel::Neon => {
            let pmull = std::arch::is_aarch64_feature_detected!("aes").then(|| {
                // SAFETY: the CPU was just found to have the `aes` feature.
                unsafe { neon::Neon::new_unchecked() }
            });
            Some(neon::run(pmull, pass))
        }
        // Kernels of other architectures: never supported here.
        _ => None,
    }
}

/// The kernels this CPU can run, for tests and benchmarks.
pub fn supported_kernels() -> impl Iterator<Item = Kernel> {
    Kernel::ALL.into_iter().filter(|k| k.is_supported())
}

#[cfg(test)]
mod tests;
