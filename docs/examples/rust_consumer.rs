// A Rust harness (std only) that checks its own FP8 E5M2 codec against the golden suite's
// text form (docs/suite-format.md, "Text form").
//
//   python -m oracle generate --out golden --text --only 'formats.*code*.e5m2*'
//   rustc --edition 2021 -O -o rust_consumer docs/examples/rust_consumer.rs
//   ./rust_consumer golden results
//   python -m oracle check golden --results results --id formats.decode.e5m2
//       --id formats.encode.e5m2.f32.nearest_even --id formats.encode.e5m2.f32.nearest_even.satfinite
//   (one command line; or --allow-missing 'E5M2 only' in place of the --id list)
//
// E5M2 as the OCP 8-bit Floating Point Specification (OFP8) rev. 1.0 defines it: sign, 5
// exponent bits (bias 15), 2 mantissa bits, IEEE-like: subnormals 2^-14 * 0.m, S.11111.00
// is Inf, S.11111.{01,10,11} NaN, the largest finite value 57344 = S.11110.11. Round to
// nearest, ties to even; an overflow gives Inf, or 57344 with saturation (the satfinite
// cases, where Inf in gives 57344 too). A third argument "wrong" flips the lowest bit of one
// code, for a failure to see.
use std::fs;
use std::io::Write;

/// Reads "# <label> <dtype> <shape> [<format>]" then one hex element a line (a 1-D array).
fn read_1d(path: &str, dtype: &str) -> Vec<u32> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap_or("").split(' ').collect();
    assert!(head.len() >= 4 && head[0] == "#" && head[2] == dtype, "{path}: not a {dtype} array");
    let v: Vec<u32> = lines.map(|l| u32::from_str_radix(l, 16).expect("a hex value")).collect();
    assert_eq!(v.len().to_string(), head[3], "{path}: count differs from the header");
    v
}

/// Writes the same layout: the header (format only for codes), then one element a line.
fn write_1d(dir: &str, id: &str, name: &str, dtype: &str, format: &str, v: &[u32], digits: usize) {
    fs::create_dir_all(format!("{dir}/{id}")).unwrap();
    let mut out = fs::File::create(format!("{dir}/{id}/{name}.txt")).unwrap();
    let fmt = if format.is_empty() { String::new() } else { format!(" {format}") };
    writeln!(out, "# {id}/{name} {dtype} {}{fmt}", v.len()).unwrap();
    for x in v {
        writeln!(out, "{x:0digits$X}").unwrap();
    }
}

/// e with 2^e <= a < 2^(e+1), for a positive normal f64 (every f32 is one).
fn binade(a: f64) -> i32 {
    ((a.to_bits() >> 52) & 0x7FF) as i32 - 1023
}

fn encode_e5m2(bits: u32, saturate: bool) -> u32 {
    let x = f32::from_bits(bits) as f64; // exact
    let sign = (bits >> 31) << 7;
    let top = if saturate { 0x7B } else { 0x7C }; // 57344 or Inf
    if x.is_nan() {
        return sign | 0x7E;
    }
    let a = x.abs();
    if a.is_infinite() {
        return sign | top;
    }
    if a == 0.0 {
        return sign;
    }
    let quantum = 2f64.powi(binade(a).max(-14) - 2); // subnormals share the lowest binade's
    let q = a / quantum; // exact: a power-of-two quotient
    let mut n = q.floor();
    if q - n > 0.5 || (q - n == 0.5 && n % 2.0 == 1.0) {
        n += 1.0; // to nearest, ties to even
    }
    let r = n * quantum;
    if r > 57344.0 {
        return sign | top;
    }
    if r < 2f64.powi(-14) {
        return sign | (r / 2f64.powi(-16)) as u32;
    }
    let e = binade(r); // r = 1.mm * 2^e
    sign | (((e + 15) as u32) << 2) | ((r / 2f64.powi(e - 2)) as u32 - 4)
}

fn decode_e5m2(c: u32) -> u32 {
    let (exp, man) = ((c >> 2) & 0x1F, c & 3);
    let a = match (exp, man) {
        (31, 0) => f32::INFINITY,
        (31, _) => f32::NAN,
        (0, m) => m as f32 * 2f32.powi(-16),
        (e, m) => (4 + m) as f32 * 2f32.powi(e as i32 - 17),
    };
    (if c & 0x80 != 0 { -a } else { a }).to_bits()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: rust_consumer SUITE RESULTS [wrong]");
        std::process::exit(2);
    }
    let (suite, results) = (&args[1], &args[2]);
    let wrong = args.get(3).map(|s| s == "wrong").unwrap_or(false);
    for sat in [false, true] {
        let id = format!("formats.encode.e5m2.f32.nearest_even{}", if sat { ".satfinite" } else { "" });
        let x = read_1d(&format!("{suite}/{id}/x.txt"), "float32");
        let mut codes: Vec<u32> = x.iter().map(|&b| encode_e5m2(b, sat)).collect();
        if wrong {
            let mid = codes.len() / 2;
            codes[mid] ^= 1;
        }
        write_1d(results, &id, "codes", "uint8", "e5m2", &codes, 2);
    }
    let id = "formats.decode.e5m2";
    let codes = read_1d(&format!("{suite}/{id}/codes.txt"), "uint8");
    let values: Vec<u32> = codes.iter().map(|&c| decode_e5m2(c)).collect();
    write_1d(results, id, "values", "float32", "", &values, 8);
}
