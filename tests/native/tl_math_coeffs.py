"""Coefficients of the correctly rounded functions in native/common/tl_math.h, from mpmath.

    python3 tests/native/tl_math_coeffs.py            # prints the C constants and each fit's error

Each polynomial is a Chebyshev interpolant (near-minimax) of the stated function on the stated
interval, converted to monomial form at 600 bits and rounded to double; the printed error is the
largest |fit - f| over 4000 points, relative to the quantity the header adds it to.
"""
import mpmath as mp

mp.mp.prec = 600   # the fitted quotients cancel near 0: a node at 1e-60 needs 400 bits


def cheb_fit(f, a, b, deg):
    """monomial coefficients (low first) of the degree-deg interpolant of f at Chebyshev nodes"""
    a, b = mp.mpf(a), mp.mpf(b)
    nodes = [(a + b) / 2 + (b - a) / 2 * mp.cos(mp.pi * (2 * k + 1) / (2 * deg + 2))
             for k in range(deg + 1)]
    nodes = [x if abs(x) > mp.mpf(10) ** -50 else mp.mpf(0) for x in nodes]  # f(0) is its limit
    vals = [f(x) for x in nodes]
    m = mp.matrix([[x ** j for j in range(deg + 1)] for x in nodes])
    c = mp.lu_solve(m, mp.matrix(vals))
    return [c[j] for j in range(deg + 1)]


def horner(cs, x):
    acc = mp.mpf(0)
    for c in reversed(cs):
        acc = acc * x + c
    return acc


def max_err(f, cs, a, b, scale, n=4000):
    worst = mp.mpf(0)
    for k in range(n + 1):
        x = mp.mpf(a) + (mp.mpf(b) - mp.mpf(a)) * k / n
        if x == 0:
            continue
        worst = max(worst, abs(horner(cs, x) - f(x)) * scale(x))
    return worst


def report(name, f, a, b, deg, scale):
    """fit, round to double, print the coefficients (high degree first, Horner order) and error"""
    cs = [mp.mpf(float(c)) for c in cheb_fit(f, a, b, deg)]
    e = max_err(f, cs, a, b, scale)
    print(f"/* {name}, degree {deg}: log2 of the largest error {float(mp.log(e, 2)):.1f} */")
    print(", ".join(float(c).hex() for c in reversed(cs)))


def dd(x):
    hi = float(x)
    return hi, float(x - mp.mpf(hi))


def main():
    ln2 = mp.log(2)
    # exp: e^r = 1 + r + r^2/2 + r^3 Q(r) on |r| <= ln2/2 (+ slack); error relative to e^r
    h = ln2 / 2 * (1 + mp.mpf(2) ** -20)
    q = lambda r: (mp.exp(r) - 1 - r - r * r / 2) / r ** 3 if r != 0 else mp.mpf(1) / 6
    report("exp Q", q, -h, h, 10, lambda r: abs(r) ** 3 / mp.exp(r))
    # exp, plain-double route (tlm_exp_q): e^r = 1 + r + r^2 Q(r); error relative to e^r
    q2 = lambda r: (mp.exp(r) - 1 - r) / r ** 2 if r != 0 else mp.mpf(1) / 2
    report("exp Q, plain route", q2, -h, h, 9, lambda r: r * r / mp.exp(r))

    # log: log(1 + f) = 2s + s z R(z), s = f / (2 + f), z = s^2 <= zmax; error relative to 2s
    smax = (mp.sqrt(2) - 1) / (mp.sqrt(2) + 1) * (1 + mp.mpf(2) ** -20)
    zmax = smax ** 2
    r = lambda z: (2 * mp.atanh(mp.sqrt(z)) - 2 * mp.sqrt(z)) / (mp.sqrt(z) * z) if z != 0 \
        else mp.mpf(2) / 3
    report("log R", r, 0, zmax, 7, lambda z: z / 2)

    # sin(2 pi s) = s (2 pi + z S(z)), z = s^2 <= 1/64; error relative to 2 pi
    tau = 2 * mp.pi
    sfun = lambda z: (mp.sin(tau * mp.sqrt(z)) / mp.sqrt(z) - tau) / z if z != 0 \
        else -tau ** 3 / 6
    report("sin S", sfun, 0, mp.mpf(1) / 64, 6, lambda z: z / tau)
    # cos(2 pi s) = 1 - 2 pi^2 z + z^2 C(z); error relative to cos >= 0.7
    cfun = lambda z: (mp.cos(tau * mp.sqrt(z)) - 1 + 2 * mp.pi ** 2 * z) / z ** 2 if z != 0 \
        else tau ** 4 / 24
    report("cos C", cfun, 0, mp.mpf(1) / 64, 5, lambda z: z * z / mp.mpf(0.7))
    print("2pi", [x.hex() for x in dd(tau)], "-2pi^2", [x.hex() for x in dd(-2 * mp.pi ** 2)])
    print("ln2", [x.hex() for x in dd(ln2)], "2/sqrt(pi)", [x.hex() for x in dd(2 / mp.sqrt(mp.pi))])

    # erf, |x| < 1/2: erf(x) = x (c0 + z Q(z)), z = x^2 <= 1/4; error relative to erf(x) / x
    c0 = 2 / mp.sqrt(mp.pi)
    efun = lambda z: (mp.erf(mp.sqrt(z)) / mp.sqrt(z) - c0) / z if z != 0 else -c0 / 3
    report("erf small Q", efun, 0, mp.mpf(1) / 4, 9, lambda z: z / c0)

    # erf on [1/2, 4): 1 - e^-x^2 G(x), G(x) = erfc(x) e^(x^2), two fits of degree 18 in
    # t = x - c, on [1/2, 7/4] and [7/4, 4]; error relative to erf(x)
    g = lambda x: mp.erfc(x) * mp.exp(x * x)
    for a, b in ((mp.mpf(1) / 2, mp.mpf(7) / 4), (mp.mpf(7) / 4, mp.mpf(4))):
        c, w = (a + b) / 2, (b - a) / 2
        report(f"erf G around {float(c)}", lambda t, c=c: g(c + t), -w, w, 18,
               lambda t, c=c: mp.exp(-(c + t) ** 2) / mp.erf(c + t))

if __name__ == "__main__":
    main()
