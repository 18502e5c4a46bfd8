// The two places where oneDNN 2.x and 3.x spell the same thing differently,
// behind one name each, so the matmul code (onednn_matmul.cpp, the roofline's
// peak in measure/roofline.cpp) is written once. Debian 12 ships oneDNN 2.6,
// Debian 13 and Ubuntu 24.04 ship 3.x; DNNL_VERSION_MAJOR picks the spelling.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace pd {

// The matmul primitive descriptor for dst (M, N) = src (M, K) @ weights (K, N)
// [+ bias (1, N)]. oneDNN 2.x builds it from an operation descriptor
// (matmul::desc); 3.0 removed those and takes the memory descriptors directly.
inline dnnl::matmul::primitive_desc onednn_matmul_pd(const dnnl::engine& eng, const dnnl::memory::desc& src,
                                                     const dnnl::memory::desc& weights,
                                                     const dnnl::memory::desc* bias, const dnnl::memory::desc& dst,
                                                     const dnnl::primitive_attr& attr = {}) {
#if DNNL_VERSION_MAJOR >= 3
    return bias ? dnnl::matmul::primitive_desc(eng, src, weights, *bias, dst, attr)
                : dnnl::matmul::primitive_desc(eng, src, weights, dst, attr);
#else
    auto d = bias ? dnnl::matmul::desc(src, weights, *bias, dst) : dnnl::matmul::desc(src, weights, dst);
    return dnnl::matmul::primitive_desc(d, attr, eng);
#endif
}

// A memory descriptor's dimensions: desc::dims() in 2.x, desc::get_dims() in 3.x.
inline dnnl::memory::dims onednn_dims(const dnnl::memory::desc& md) {
#if DNNL_VERSION_MAJOR >= 3
    return md.get_dims();
#else
    return md.dims();
#endif
}

}  // namespace pd
