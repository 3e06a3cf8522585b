// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Command-line front end of `quads::reference` for the Python byte-exact comparison.
//!
//! Reads a raw little-endian fp32 tensor `[experts, rows, cols]`, quantizes it with
//! `reference::quantize<Format, Options, Layout>` and writes four raw files next to `--out PREFIX`:
//! - `PREFIX.data`:   packed E2M1 codes (`experts * rows * cols / 2` bytes),
//! - `PREFIX.scales`: scale bytes in the chosen layout, padding included,
//! - `PREFIX.tscale`: tensor scales as fp32 pairs (encode, decode), one per expert or per row,
//! - `PREFIX.deq`:    `reference::dequantize` of the result, fp32.
//! Options are parsed at run time and dispatched to one template instantiation per supported
//! combination (see `dispatch`). Errors (bad options, bad shapes) print one line on stderr and
//! exit with status 2.
#include <quads/quads.hpp>
#include <quads/reference/tensor.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct config {
  std::string scheme = "nvfp4";
  std::string rounding = "nearest";
  std::string block_rule = "amax6";
  std::string global = "per_tensor";
  std::string mx_rounding = "round_up";
  std::string layout = "linear";
  std::uint64_t seed = 0;
  std::vector<float> given;  // decode-direction scales, 1 or `experts` of them
  int experts = 1;
  int rows = 0;
  int cols = 0;
  std::string in;
  std::string out;
};

[[noreturn]] void fail(const std::string& msg) {
  std::cerr << "quads_dump: error: " << msg << '\n';
  std::exit(2);
}

int parse_int(const std::string& s, const char* what) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0') fail(std::string("bad integer for ") + what + ": '" + s + "'");
  return static_cast<int>(v);
}

// strtof reads hexadecimal floats exactly, so the caller can pass float.hex() strings.
std::vector<float> parse_floats(const std::string& s) {
  std::vector<float> v;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t comma = s.find(',', pos);
    const std::size_t len = comma == std::string::npos ? std::string::npos : comma - pos;
    const std::string item = s.substr(pos, len);
    char* end = nullptr;
    const float f = std::strtof(item.c_str(), &end);
    if (item.empty() || *end != '\0') fail("bad float in --given: '" + item + "'");
    v.push_back(f);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return v;
}

config parse(int argc, char** argv) {
  config c;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (i + 1 >= argc) fail("missing value after " + key);
    const std::string val = argv[++i];
    if (key == "--scheme") c.scheme = val;
    else if (key == "--rounding") c.rounding = val;
    else if (key == "--seed") c.seed = std::strtoull(val.c_str(), nullptr, 0);
    else if (key == "--block-rule") c.block_rule = val;
    else if (key == "--global") c.global = val;
    else if (key == "--given") c.given = parse_floats(val);
    else if (key == "--mx-rounding") c.mx_rounding = val;
    else if (key == "--layout") c.layout = val;
    else if (key == "--experts") c.experts = parse_int(val, "--experts");
    else if (key == "--rows") c.rows = parse_int(val, "--rows");
    else if (key == "--cols") c.cols = parse_int(val, "--cols");
    else if (key == "--in") c.in = val;
    else if (key == "--out") c.out = val;
    else fail("unknown option " + key);
  }
  if (c.in.empty() || c.out.empty()) fail("--in FILE and --out PREFIX are required");
  return c;
}

std::vector<float> read_input(const config& c) {
  std::ifstream f(c.in, std::ios::binary | std::ios::ate);
  if (!f) fail("cannot open " + c.in);
  const std::streamsize bytes = f.tellg();
  if (bytes % 4 != 0) fail(c.in + " is not a whole number of fp32 values");
  std::vector<float> x(static_cast<std::size_t>(bytes / 4));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(x.data()), bytes);
  return x;
}

void write_file(const std::string& path, const void* p, std::size_t bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(p), static_cast<std::streamsize>(bytes));
  if (!f) fail("cannot write " + path);
}

template <class Format, quads::quant_options Options, class Layout>
void run(const config& c, const std::vector<float>& x) {
  std::vector<quads::tensor_scale> given;
  for (float d : c.given) given.push_back(quads::tensor_scale_from_decode(d));
  if (Options.global == quads::global_scale::given && Format::has_tensor_scale && given.empty())
    fail("--global given needs --given DECODE_SCALE[,...]");
  quads::reference::quantize_args args{c.experts, given, c.seed};
  const auto q = quads::reference::quantize<Format, Options, Layout>(x, c.rows, c.cols, args);
  const std::vector<float> deq = quads::reference::dequantize<Format, Options>(q);
  std::vector<float> ts;
  for (const quads::tensor_scale& s : q.tensor_scales) {
    ts.push_back(s.encode);
    ts.push_back(s.decode);
  }
  write_file(c.out + ".data", q.data.data(), q.data.size());
  write_file(c.out + ".scales", q.scales.data(), q.scales.size());
  write_file(c.out + ".tscale", ts.data(), ts.size() * sizeof(float));
  write_file(c.out + ".deq", deq.data(), deq.size() * sizeof(float));
}

template <class Format, quads::quant_options Options>
void with_layout(const config& c, const std::vector<float>& x) {
  if (c.layout == "linear") return run<Format, Options, quads::linear_scales>(c, x);
  if (c.layout == "swizzled") return run<Format, Options, quads::swizzled_128x4>(c, x);
  fail("--layout must be linear or swizzled, got '" + c.layout + "'");
}

template <class Format, quads::quant_options Options>
void with_rounding(const config& c, const std::vector<float>& x) {
  using quads::rounding;
  constexpr quads::quant_options sr{rounding::stochastic, Options.math, Options.block_rule,
                                    Options.global, Options.mx_rounding};
  if (c.rounding == "nearest") return with_layout<Format, Options>(c, x);
  if (c.rounding == "stochastic") return with_layout<Format, sr>(c, x);
  fail("--rounding must be nearest or stochastic, got '" + c.rounding + "'");
}

template <quads::block_scale_rule Rule>
void nvfp4_global(const config& c, const std::vector<float>& x) {
  using quads::global_scale;
  using quads::nvfp4;
  if (c.global == "per_tensor")
    return with_rounding<nvfp4, {.block_rule = Rule, .global = global_scale::per_tensor}>(c, x);
  if (c.global == "per_row")
    return with_rounding<nvfp4, {.block_rule = Rule, .global = global_scale::per_row}>(c, x);
  if (c.global == "given")
    return with_rounding<nvfp4, {.block_rule = Rule, .global = global_scale::given}>(c, x);
  fail("--global must be per_tensor, per_row or given, got '" + c.global + "'");
}

// Supported: nvfp4 x {amax6, four_over_six} x {per_tensor, per_row, given};
//            mxfp4 x {round_up, floor}; each x {nearest, stochastic} x {linear, swizzled}.
void dispatch(const config& c, const std::vector<float>& x) {
  using quads::block_scale_rule;
  using quads::mxfp4;
  using quads::ue8m0_rounding;
  if (c.scheme == "mxfp4") {
    if (c.block_rule != "amax6") fail("--block-rule four_over_six needs --scheme nvfp4");
    if (c.global != "per_tensor") fail("mxfp4 has no tensor scale: --global must be per_tensor");
    if (c.mx_rounding == "round_up")
      return with_rounding<mxfp4, {.mx_rounding = ue8m0_rounding::round_up}>(c, x);
    if (c.mx_rounding == "floor")
      return with_rounding<mxfp4, {.mx_rounding = ue8m0_rounding::floor}>(c, x);
    fail("--mx-rounding must be round_up or floor, got '" + c.mx_rounding + "'");
  }
  if (c.scheme != "nvfp4") fail("--scheme must be nvfp4 or mxfp4, got '" + c.scheme + "'");
  if (c.block_rule == "amax6") return nvfp4_global<block_scale_rule::amax_to_6>(c, x);
  if (c.block_rule == "four_over_six") return nvfp4_global<block_scale_rule::four_over_six>(c, x);
  fail("--block-rule must be amax6 or four_over_six, got '" + c.block_rule + "'");
}

} // namespace

int main(int argc, char** argv) {
  const config c = parse(argc, argv);
  const std::vector<float> x = read_input(c);
  try {
    dispatch(c, x);
  } catch (const std::exception& e) {
    fail(e.what());
  }
  return 0;
}
