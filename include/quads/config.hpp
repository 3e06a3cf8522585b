// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Language check, execution-space macros and feature-detection macros.
#pragma once

#if !defined(__cplusplus) || (__cplusplus < 202002L && !defined(_MSVC_LANG))
#  error "quads needs C++20: pass -std=c++20 (g++/clang++) or -std=c++20 (nvcc)"
#endif

#include <quads/version.hpp>

//! True while compiling with a CUDA compiler (either the host or the device pass).
#if defined(__CUDACC__)
#  define QUADS_CUDA_COMPILATION() 1
#else
#  define QUADS_CUDA_COMPILATION() 0
#endif

//! Execution-space macros. Library headers never spell the raw keywords.
#if QUADS_CUDA_COMPILATION()
#  define QUADS_HOST_DEVICE __host__ __device__
#  define QUADS_DEVICE __device__
#  define QUADS_FORCEINLINE __forceinline__
#else
#  define QUADS_HOST_DEVICE
#  define QUADS_DEVICE
#  define QUADS_FORCEINLINE inline __attribute__((always_inline))
#endif

//! Public host+device function.
#define QUADS_API QUADS_HOST_DEVICE QUADS_FORCEINLINE
//! Public device-only function (only in `.cuh` headers).
#define QUADS_DEVICE_API QUADS_DEVICE QUADS_FORCEINLINE

//! The CUDA Toolkit's FP4/FP8 conversion headers are reachable (usable with g++ too).
#if !defined(QUADS_DISABLE_CUDA_FP_INTEROP) && __has_include(<cuda_fp4.h>) &&                   \
    __has_include(<cuda_fp8.h>)
#  define QUADS_HAS_CUDA_FP() 1
#else
#  define QUADS_HAS_CUDA_FP() 0
#endif
