"""BLS12-381 constants as Python ints, with import-time sanity checks.

Sources: the BLS12-381 description in draft-irtf-cfrg-pairing-friendly-curves (section 4.2.1) and the zcash
``pairing`` crate. Every constant below is re-derived or checked against its defining relation when this module is
imported, so a typo fails loudly instead of producing wrong proofs.
"""

# The curve parameter x (negative); p and r are polynomials in it.
X = -0xD201000000010000

# Base field modulus p (381 bits) and scalar field (group order) r (255 bits).
P = 0x1A0111EA397FE69A4B1BA7B6434BACD764774B84F38512BF6730D2A0F6B0F6241EABFFFEB153FFFFB9FEFFFFFFFFAAAB
R = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001

# Curve equations: E1: y^2 = x^3 + 4 over Fq; E2: y^2 = x^3 + 4(1 + u) over Fq2 = Fq[u] / (u^2 + 1).
B1 = 4
B2 = (4, 4)
FQ2_NONRESIDUE = -1  # u^2 = FQ2_NONRESIDUE

# Generators (affine), as in the zcash/IETF specification.
G1_X = 0x17F1D3A73197D7942695638C4FA9AC0FC3688C4F9774B905A14E3A3F171BAC586C55E83FF97A1AEFFB3AF00ADB22C6BB
G1_Y = 0x08B3F481E3AAA0F1A09E30ED741D8AE4FCF5E095D5D00AF600DB18CB2C04B3EDD03CC744A2888AE40CAA232946C5E7E1
G2_X = (
    0x024AA2B2F08F0A91260805272DC51051C6E47AD4FA403B02B4510B647AE3D1770BAC0326A805BBEFD48056C8C121BDB8,
    0x13E02B6052719F607DACD3A088274F65596BD0D09920B61AB5DA61BBDC7F5049334CF11213945D57E5AC7D055D042B7E,
)
G2_Y = (
    0x0CE5D527727D6E118CC9CDC6DA2E351AADFD9BAA8CBDD3A76D429A695160D12C923AC9CC3BACA289E193548608B82801,
    0x0606C4A02EA734CC32ACD2B02BC28B99CB3E287E85A763AF267492AB572E99AB3F370D275CEC1DA1AAA9075FF05F79BE,
)

# Cofactors: #E1(Fq) = H1 * R, #E2(Fq2) = H2 * R.
H1 = 0x396C8C005555E1568C00AAAB0000AAAB
H2 = 0x5D543A95414E7F1091D50792876A202CD91DE4547085ABAA68A205B2E5A7DDFA628F1CB4D9E82EF21537E293A6691AE1616EC6E786F0C70CF1C38E31C7238E5

# Fr: two-adicity 32, multiplicative generator 7 (as in the zcash ``ff`` implementation of BLS12-381 Fr).
FR_TWO_ADICITY = 32
FR_GENERATOR = 7
FR_ROOT_OF_UNITY = pow(FR_GENERATOR, (R - 1) >> FR_TWO_ADICITY, R)  # primitive 2^32-th root of unity

# Limb geometry used by the array layers: little-endian 32-bit limbs, Montgomery radix 2^(32 L).
FQ_LIMBS = 12
FR_LIMBS = 8
FQ_BYTES = 48
FR_BYTES = 32


def _check() -> None:
    x = X
    assert R == x**4 - x**2 + 1, "r does not match the BLS12-381 parameter x"
    assert P == (x - 1) ** 2 * R // 3 + x and (x - 1) ** 2 * R % 3 == 0, "p does not match x"
    assert P.bit_length() == 381 and R.bit_length() == 255
    assert P % 4 == 3, "Fq sqrt uses the (p+1)/4 exponent"
    # Generators are on their curves.
    assert (G1_Y * G1_Y - G1_X**3 - B1) % P == 0, "G1 generator not on curve"
    x0, x1 = G2_X
    y0, y1 = G2_Y
    # (a0 + a1 u)^2 = a0^2 - a1^2 + 2 a0 a1 u ;  x^3 computed the same way.
    xx0, xx1 = (x0 * x0 - x1 * x1) % P, 2 * x0 * x1 % P
    xxx0, xxx1 = (xx0 * x0 - xx1 * x1) % P, (xx0 * x1 + xx1 * x0) % P
    yy0, yy1 = (y0 * y0 - y1 * y1) % P, 2 * y0 * y1 % P
    assert (yy0 - xxx0 - B2[0]) % P == 0 and (yy1 - xxx1 - B2[1]) % P == 0, "G2 generator not on curve"
    # Group orders: #E1 = p + 1 - t with trace t = x + 1.
    assert H1 * R == P + 1 - (x + 1), "G1 cofactor"
    # Fr two-adicity and root of unity.
    assert (R - 1) % (1 << FR_TWO_ADICITY) == 0 and ((R - 1) >> FR_TWO_ADICITY) % 2 == 1
    assert pow(FR_ROOT_OF_UNITY, 1 << FR_TWO_ADICITY, R) == 1
    assert pow(FR_ROOT_OF_UNITY, 1 << (FR_TWO_ADICITY - 1), R) == R - 1, "root of unity not primitive"
    # 7 is a quadratic non-residue mod r (so its (r-1)/2^32 power has full 2-adic order).
    assert pow(FR_GENERATOR, (R - 1) // 2, R) == R - 1


_check()
