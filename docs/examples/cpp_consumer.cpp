// A C++17 harness that checks its own FP8 E4M3 codec against the golden suite's text form
// (docs/suite-format.md, "Text form"), with no library beyond the standard one.
//
//   python -m oracle generate --out golden --text --only 'formats.*code*.e4m3*'
//   g++ -std=c++17 -O2 -o cpp_consumer docs/examples/cpp_consumer.cpp
//   ./cpp_consumer golden results
//   python -m oracle check golden --results results --id formats.decode.e4m3
//       --id formats.encode.e4m3.f32.nearest_even --id formats.encode.e4m3.f32.nearest_even.satfinite
//   (one command line; or --allow-missing 'E4M3 only' in place of the --id list)
//
// E4M3 as the OCP 8-bit Floating Point Specification (OFP8) rev. 1.0 defines it: sign, 4
// exponent bits (bias 7), 3 mantissa bits; subnormals 2^-6 * 0.m; no infinities; S.1111.111
// is NaN, so the largest value is S.1111.110 = 448. Round to nearest, ties to even; an
// overflow gives NaN, or 448 with saturation (the satfinite cases); Inf in gives NaN (448).
// A third argument "wrong" flips the lowest bit of one code, for a failure to see.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

// Reads "# <label> <dtype> <shape> [<format>]" then one hex element a line (a 1-D array).
static std::vector<uint32_t> read_1d(const std::string& path, const std::string& dtype) {
    std::ifstream in(path);
    std::string hash, label, dt, shape;
    if (!(in >> hash >> label >> dt >> shape) || hash != "#" || dt != dtype)
        throw std::runtime_error(path + ": not a " + dtype + " array in the text layout");
    in.ignore(1 << 20, '\n');
    std::vector<uint32_t> out;
    for (std::string tok; in >> tok;) out.push_back(uint32_t(std::stoul(tok, nullptr, 16)));
    if (std::to_string(out.size()) != shape)
        throw std::runtime_error(path + ": " + std::to_string(out.size()) + " values, header says " + shape);
    return out;
}

// Writes the same layout: the header (format only for codes), then one element a line.
static void write_1d(const std::string& dir, const std::string& id, const std::string& name,
                     const std::string& dtype, const std::string& format,
                     const std::vector<uint32_t>& v, int digits) {
    std::filesystem::create_directories(dir + "/" + id);
    std::ofstream out(dir + "/" + id + "/" + name + ".txt");
    out << "# " << id << "/" << name << " " << dtype << " " << v.size()
        << (format.empty() ? "" : " " + format) << "\n";
    char buf[16];
    for (uint32_t x : v) { std::snprintf(buf, sizeof buf, "%0*X", digits, x); out << buf << "\n"; }
}

static uint32_t encode_e4m3(uint32_t bits, bool saturate) {
    float f;
    std::memcpy(&f, &bits, 4);
    uint32_t sign = (bits >> 31) << 7;
    if (std::isnan(f)) return sign | 0x7F;
    double a = std::fabs(double(f));
    if (std::isinf(f)) return sign | (saturate ? 0x7E : 0x7F);
    if (a == 0) return sign;
    int e;
    std::frexp(a, &e);                                      // a = m * 2^e, 0.5 <= m < 1
    double quantum = std::ldexp(1.0, std::max(e - 1, -6) - 3);
    double r = std::nearbyint(a / quantum) * quantum;       // exact; ties to even
    if (r > 448) return sign | (saturate ? 0x7E : 0x7F);
    if (r < std::ldexp(1.0, -6)) return sign | uint32_t(r / std::ldexp(1.0, -9));
    std::frexp(r, &e);
    return sign | uint32_t((e - 1 + 7) << 3) | (uint32_t(r / std::ldexp(1.0, e - 4)) - 8);
}

static uint32_t decode_e4m3(uint32_t c) {
    uint32_t exp = (c >> 3) & 0xF, man = c & 7;
    float f = exp == 15 && man == 7 ? NAN
            : exp == 0 ? std::ldexp(float(man), -9) : std::ldexp(float(8 + man), int(exp) - 10);
    if (c & 0x80) f = -f;
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return bits;
}

int main(int argc, char** argv) {
    if (argc < 3) { std::cerr << "usage: cpp_consumer SUITE RESULTS [wrong]\n"; return 2; }
    std::string suite = argv[1], results = argv[2];
    bool wrong = argc > 3 && std::string(argv[3]) == "wrong";
    for (bool sat : {false, true}) {
        std::string id = std::string("formats.encode.e4m3.f32.nearest_even") + (sat ? ".satfinite" : "");
        std::vector<uint32_t> codes;
        for (uint32_t x : read_1d(suite + "/" + id + "/x.txt", "float32")) codes.push_back(encode_e4m3(x, sat));
        if (wrong) codes[codes.size() / 2] ^= 1;
        write_1d(results, id, "codes", "uint8", "e4m3", codes, 2);
    }
    std::string id = "formats.decode.e4m3";
    std::vector<uint32_t> values;
    for (uint32_t c : read_1d(suite + "/" + id + "/codes.txt", "uint8")) values.push_back(decode_e4m3(c));
    write_1d(results, id, "values", "float32", "", values, 8);
    return 0;
}
