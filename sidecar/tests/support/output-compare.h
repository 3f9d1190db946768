// How a reduced-precision forward is compared with a reference one, the same everywhere it is reported (the
// accuracy tests, sidecar/tools/rfdetr-accuracy, bench/engine/int8-bench): the overlap of the 100 highest
// flattened logits (../shared/peers/int8_peers.py's `top100`: descending, ties to the lower index), the Pearson
// correlation, and the largest absolute difference.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <set>
#include <vector>

namespace rfdetr::test {

// The indices of the 100 largest values (all of them when there are fewer).
inline std::set<size_t> top100(const std::vector<float> & v) {
    std::vector<size_t> i(v.size());
    std::iota(i.begin(), i.end(), 0);
    const size_t n = std::min<size_t>(100, v.size());
    std::partial_sort(i.begin(), i.begin() + n, i.end(), [&](size_t a, size_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
    return {i.begin(), i.begin() + n};
}

// How many of a's 100 largest are among b's.
inline size_t top100_overlap(const std::vector<float> & a, const std::vector<float> & b) {
    const auto sa = top100(a), sb = top100(b);
    size_t     n  = 0;
    for (size_t i : sa) n += sb.count(i);
    return n;
}

inline double pcc(const std::vector<float> & a, const std::vector<float> & b) {
    double ma = 0, mb = 0;
    for (size_t i = 0; i < a.size(); ++i) ma += a[i], mb += b[i];
    ma /= a.size(), mb /= b.size();
    double sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        sab += (a[i] - ma) * (b[i] - mb), saa += (a[i] - ma) * (a[i] - ma), sbb += (b[i] - mb) * (b[i] - mb);
    }
    return sab / std::sqrt(saa * sbb);
}

// max |a - b|; infinite when a holds a NaN or an infinity (a broken forward is never a small error).
inline double max_abs(const std::vector<float> & a, const std::vector<float> & b) {
    double e = 0;
    for (size_t i = 0; i < a.size(); ++i) e = std::isfinite(a[i]) ? std::max(e, std::fabs((double)a[i] - b[i])) : INFINITY;
    return e;
}

}  // namespace rfdetr::test
