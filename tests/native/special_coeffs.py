"""Coefficients of native/common/tl_math_special.h, from mpmath at 50 digits (rerun to check:
`python3 tests/native/special_coeffs.py` prints the C lines pasted into the header)."""
import mpmath as mp

mp.mp.dps = 50


def h(v):
    return float(v).hex()


def lines(name, cs):
    print(f"/* {name} */")
    for i in range(0, len(cs), 3):
        print("        " + ", ".join(h(c) for c in cs[i:i + 3]) + ",")


def main():
    g = mp.euler
    lines("lgamma(1 + z): coefficient of z^(j+1)", [-g] + [(-1) ** (j + 1) * mp.zeta(j + 1) / (j + 1) for j in range(1, 28)])
    lines("lgamma(2 + z)", [1 - g] + [(-1) ** (j + 1) * (mp.zeta(j + 1) - 1) / (j + 1) for j in range(1, 42)])
    root = mp.findroot(mp.digamma, 1.46)
    hi = float(root)
    print("/* digamma root", h(hi), h(root - hi), "*/")
    lines("digamma(root + z)", [mp.polygamma(j + 1, root) / mp.factorial(j + 1) for j in range(24)])
    B = [mp.bernoulli(2 * k) for k in range(1, 9)]
    print("/* Stirling, k = 8 .. 1 */", ", ".join(h(B[k - 1] / (2 * k * (2 * k - 1))) for k in range(8, 0, -1)))
    print("/* digamma asymptotic, k = 8 .. 1 */", ", ".join(h(-B[k - 1] / (2 * k)) for k in range(8, 0, -1)))
    print("/* constants */", "euler", h(g), "log2pi/2", h(mp.log(2 * mp.pi) / 2), "logpi", h(mp.log(mp.pi)),
          "2/sqrtpi", h(2 / mp.sqrt(mp.pi)), "1/sqrtpi", h(1 / mp.sqrt(mp.pi)))


if __name__ == "__main__":
    main()
