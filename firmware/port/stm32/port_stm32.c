/*
 * STM32 port, register level (no vendor HAL; builds with Debian's arm-none-eabi-gcc and with the
 * official PlatformIO ststm32 platform without a framework). One file for four parts:
 *
 *   SNAPUQ_STM32F767  Nucleo-F767ZI ("Big-MCU"), Cortex-M7 + FPv5-D16. HSI 16 MHz -> PLL (M=8, N=216,
 *                     P=2) = 216 MHz, voltage scale 1 + over-drive, 7 flash wait states, ART + prefetch,
 *                     L1 I/D caches on. APB1 54 MHz (USART3 on PD8/PD9 = ST-LINK VCP), APB2 108 MHz.
 *                     Timestamp pin PB0 (LD1).
 *   SNAPUQ_STM32L432  Nucleo-L432KC ("Small-MCU"), Cortex-M4 + FPv4-SP. MSI 4 MHz -> PLL (M=1, N=40,
 *                     R=2) = 80 MHz, range 1, 4 wait states, prefetch + I/D caches. APB1 80 MHz
 *                     (USART2 on PA2/PA15 = ST-LINK VCP). Timestamp pin PB3 (LD3).
 *   SNAPUQ_STM32F446  Nucleo-F446RE, Cortex-M4 + FPv4-SP. HSI -> PLL (M=8, N=180, P=2) = 180 MHz,
 *                     scale 1 + over-drive, 5 wait states, ART (I/D caches + prefetch). APB1 45 MHz
 *                     (USART2 on PA2/PA3 = ST-LINK VCP), APB2 90 MHz. Timestamp pin PA5 (LD2).
 *   SNAPUQ_STM32F405  STM32F405 (QEMU netduinoplus2 in CI; a real F405 alike), Cortex-M4 + FPv4-SP.
 *                     HSI -> PLL (M=8, N=168, P=2, Q=7) = 168 MHz, 5 wait states, APB2 84 MHz
 *                     (USART1 on PA9/PA10), APB1 42 MHz. Timestamp pin PB0.
 *
 * F2/F4 parts have the "v1" USART (SR/DR/BRR/CR1), F7 and L4 the "v2" one (CR1/BRR/ISR/RDR/TDR).
 * Baud rates are computed from the bus clock the port really set up (oversampling by 16:
 * BRR = round(f_bus / baud) for both layouts).
 *
 * Every wait on a ready flag is bounded. If a step of the clock bring-up times out the port undoes
 * it, keeps the reset clock and says so: snapuq_port_clock() (the `clock=` field of `profile` and of
 * the boot line) then reads e.g. "reset_hsi_16mhz(timeout:pll_lock)".
 *
 * Emulators: QEMU's netduinoplus2 models the F405's USARTs but neither the RCC nor the DWT (reads
 * return 0). The port detects both: RCC_CR == 0 is impossible on silicon (the reset clock's ON and
 * READY bits are set), so the clock is left alone and reported as the emulator's fixed SYSCLK
 * (SNAPUQ_QEMU_SYSCLK_HZ, 168 MHz for netduinoplus2); a DWT cycle counter that does not move falls back
 * to SysTick on the core clock ("systick_cycles", or "qemu_systick_<MHz>mhz" under the emulator).
 */
#include "../cortexm/cortexm.h"
#include "../snapuq_port.h"

#define STR_(x) #x
#define STR(x) STR_(x)

#define BAUD 115200u
#define WAIT_LOOPS 2000000u /* bound of every ready-flag wait (>= 0.1 s at the reset clock) */

#if defined(SNAPUQ_STM32F767)
#define FAM_F7 1
#define BOARD_DEFAULT "nucleo_f767zi"
#define CPU "cortex-m7"
#define RESET_HZ 16000000u
#define RESET_NAME "reset_hsi_16mhz"
#define PLL_M 8u
#define PLL_N 216u
#define PLL_Q 9u
#define TARGET_HZ 216000000u
#define FLASH_WS 7u
#define OVERDRIVE 1
#define PPRE1_DIV 4u
#define PPRE2_DIV 2u
#define USART_V2 1
#define USART 0x40004800u /* USART3 on APB1 */
#define USART_ON_APB2 0
#define PLL_NAME "pll_hsi_216mhz"
#elif defined(SNAPUQ_STM32L432)
#define FAM_L4 1
#define BOARD_DEFAULT "nucleo_l432kc"
#define CPU "cortex-m4"
#define RESET_HZ 4000000u
#define RESET_NAME "reset_msi_4mhz"
#define TARGET_HZ 80000000u
#define FLASH_WS 4u
#define USART_V2 1
#define USART 0x40004400u /* USART2 on APB1 (PCLK1 = HCLK) */
#define PLL_NAME "pll_msi_80mhz"
#elif defined(SNAPUQ_STM32F446)
#define FAM_F4 1
#define BOARD_DEFAULT "nucleo_f446re"
#define CPU "cortex-m4"
#define RESET_HZ 16000000u
#define RESET_NAME "reset_hsi_16mhz"
#define PLL_M 8u
#define PLL_N 180u
#define PLL_Q 8u
#define TARGET_HZ 180000000u
#define FLASH_WS 5u
#define OVERDRIVE 1
#define PPRE1_DIV 4u
#define PPRE2_DIV 2u
#define USART 0x40004400u /* USART2 on APB1 */
#define USART_ON_APB2 0
#define PLL_NAME "pll_hsi_180mhz"
#elif defined(SNAPUQ_STM32F405)
#define FAM_F4 1
#define BOARD_DEFAULT "stm32f405"
#define CPU "cortex-m4"
#define RESET_HZ 16000000u
#define RESET_NAME "reset_hsi_16mhz"
#define PLL_M 8u
#define PLL_N 168u
#define PLL_Q 7u
#define TARGET_HZ 168000000u
#define FLASH_WS 5u
#define OVERDRIVE 0
#define PPRE1_DIV 4u
#define PPRE2_DIV 2u
#define USART 0x40011000u /* USART1 on APB2 */
#define USART_ON_APB2 1
#define PLL_NAME "pll_hsi_168mhz"
#else
#error "define SNAPUQ_STM32F767, SNAPUQ_STM32L432, SNAPUQ_STM32F446 or SNAPUQ_STM32F405"
#endif

#ifdef SNAPUQ_BOARD
#define BOARD STR(SNAPUQ_BOARD)
#else
#define BOARD BOARD_DEFAULT
#endif

/* ------------------------------------------------------------------ registers */
#if defined(FAM_L4)
#define RCC 0x40021000u
#define RCC_CR (RCC + 0x00u)
#define RCC_CFGR (RCC + 0x08u)
#define RCC_PLLCFGR (RCC + 0x0Cu)
#define RCC_AHB2ENR (RCC + 0x4Cu)
#define RCC_APB1ENR1 (RCC + 0x58u)
#define FLASH_ACR 0x40022000u
#define PWR_CR1 0x40007000u
#define PWR_SR2 0x40007014u
#define GPIOA 0x48000000u
#define GPIOB 0x48000400u
#else /* F4 and F7 share the RCC, flash interface and GPIO addresses used here */
#define RCC 0x40023800u
#define RCC_CR (RCC + 0x00u)
#define RCC_PLLCFGR (RCC + 0x04u)
#define RCC_CFGR (RCC + 0x08u)
#define RCC_AHB1ENR (RCC + 0x30u)
#define RCC_APB1ENR (RCC + 0x40u)
#define RCC_APB2ENR (RCC + 0x44u)
#define FLASH_ACR 0x40023C00u
#define PWR_CR 0x40007000u
#define PWR_CSR 0x40007004u
#define GPIOA 0x40020000u
#define GPIOB 0x40020400u
#define GPIOD 0x40020C00u
#endif

#if defined(USART_V2)
#define USART_CR1 (USART + 0x00u)
#define USART_BRR (USART + 0x0Cu)
#define USART_ISR (USART + 0x1Cu)
#define USART_ICR (USART + 0x20u)
#define USART_RDR (USART + 0x24u)
#define USART_TDR (USART + 0x28u)
#define CR1_ENABLE ((1u << 0) | (1u << 2) | (1u << 3)) /* UE, RE, TE */
#else
#define USART_ISR (USART + 0x00u) /* SR */
#define USART_RDR (USART + 0x04u) /* DR */
#define USART_TDR (USART + 0x04u)
#define USART_BRR (USART + 0x08u)
#define USART_CR1 (USART + 0x0Cu)
#define CR1_ENABLE ((1u << 13) | (1u << 2) | (1u << 3)) /* UE, RE, TE */
#endif
#define ISR_ORE (1u << 3)
#define ISR_RXNE (1u << 5)
#define ISR_TXE (1u << 7)

/* Cortex-M7 cache maintenance (SCB) */
#define SCB_CCR 0xE000ED14u
#define SCB_CCSIDR 0xE000ED80u
#define SCB_CSSELR 0xE000ED84u
#define SCB_ICIALLU 0xE000EF50u
#define SCB_DCISW 0xE000EF60u

/* ------------------------------------------------------------------ state */
static uint32_t cpu_hz = RESET_HZ;
static uint32_t usart_hz = RESET_HZ;
static const char *clock_desc = RESET_NAME;
static int emulated;     /* no RCC model: an emulator */
static int clock_failed; /* a bring-up step timed out: the reset clock runs */
static int have_dwt;
static uint32_t last_cyc, wraps;

/* Wait until (reg & mask) == want; 0 when it got there, -1 after WAIT_LOOPS polls. */
static int wait_bits(uint32_t reg, uint32_t mask, uint32_t want)
{
    uint32_t n;
    for (n = 0u; n < WAIT_LOOPS; n++) {
        if ((SNAPUQ_REG(reg) & mask) == want) {
            return 0;
        }
    }
    return -1;
}

/* ------------------------------------------------------------------ clocks */
#if defined(FAM_L4)
static const char *clock_up(void)
{
    SNAPUQ_REG(RCC_APB1ENR1) |= (1u << 28); /* PWREN */
    (void)SNAPUQ_REG(RCC_APB1ENR1);
    /* voltage range 1 (the reset value; set it anyway) and wait for VOSF to clear */
    SNAPUQ_REG(PWR_CR1) = (SNAPUQ_REG(PWR_CR1) & ~(3u << 9)) | (1u << 9);
    if (wait_bits(PWR_SR2, 1u << 10, 0u) != 0) {
        return "timeout:vos";
    }
    /* 4 wait states + prefetch + I/D caches before raising the clock */
    SNAPUQ_REG(FLASH_ACR) = (SNAPUQ_REG(FLASH_ACR) & ~7u) | FLASH_WS | (1u << 8) | (1u << 9) | (1u << 10);
    if (wait_bits(FLASH_ACR, 7u, FLASH_WS) != 0) {
        return "timeout:flash_latency";
    }
    /* PLL: source MSI 4 MHz (PLLSRC=01), M=1, N=40 -> VCO 160 MHz, R=2 -> 80 MHz, PLLREN */
    SNAPUQ_REG(RCC_CR) &= ~(1u << 24);
    if (wait_bits(RCC_CR, 1u << 25, 0u) != 0) {
        return "timeout:pll_off";
    }
    SNAPUQ_REG(RCC_PLLCFGR) = 1u | (0u << 4) | (40u << 8) | (0u << 25) | (1u << 24);
    SNAPUQ_REG(RCC_CR) |= (1u << 24); /* PLLON */
    if (wait_bits(RCC_CR, 1u << 25, 1u << 25) != 0) {
        return "timeout:pll_lock";
    }
    /* AHB, APB1, APB2 undivided (80 MHz is every bus's maximum); SYSCLK = PLL */
    SNAPUQ_REG(RCC_CFGR) = (SNAPUQ_REG(RCC_CFGR) & ~0x3FF3u) | 3u;
    if (wait_bits(RCC_CFGR, 3u << 2, 3u << 2) != 0) {
        return "timeout:sysclk_switch";
    }
    usart_hz = TARGET_HZ;
    return 0;
}

static void clock_back(void)
{
    SNAPUQ_REG(RCC_CFGR) &= ~0x3FF3u; /* SYSCLK = MSI, no prescalers */
    (void)wait_bits(RCC_CFGR, 3u << 2, 0u);
    SNAPUQ_REG(RCC_CR) &= ~(1u << 24);
    SNAPUQ_REG(FLASH_ACR) &= ~7u;
    usart_hz = RESET_HZ;
}
#else
static uint32_t ppre_bits(uint32_t div) { return div == 1u ? 0u : div == 2u ? 4u : div == 4u ? 5u : 6u; }

static const char *clock_up(void)
{
    SNAPUQ_REG(RCC_APB1ENR) |= (1u << 28); /* PWREN */
    (void)SNAPUQ_REG(RCC_APB1ENR);
#if defined(SNAPUQ_STM32F405)
    SNAPUQ_REG(PWR_CR) |= (1u << 14); /* VOS: scale 1 (up to 168 MHz) */
#else
    SNAPUQ_REG(PWR_CR) |= (3u << 14); /* VOS: scale 1 */
#endif
    /* flash wait states (+ F7: ART + prefetch; F4: I/D caches + prefetch) before raising the clock */
#if defined(FAM_F7)
    SNAPUQ_REG(FLASH_ACR) = (SNAPUQ_REG(FLASH_ACR) & ~0xFu) | FLASH_WS | (1u << 8) | (1u << 9);
#else
    SNAPUQ_REG(FLASH_ACR) = (SNAPUQ_REG(FLASH_ACR) & ~0xFu) | FLASH_WS | (1u << 8) | (1u << 9) | (1u << 10);
#endif
    if (wait_bits(FLASH_ACR, 0xFu, FLASH_WS) != 0) {
        return "timeout:flash_latency";
    }
    /* PLL from HSI 16 MHz: M=8 -> 2 MHz in, N -> VCO 2N MHz, P=2 -> SYSCLK N MHz; PLLR bits kept */
    SNAPUQ_REG(RCC_CR) &= ~(1u << 24);
    if (wait_bits(RCC_CR, 1u << 25, 0u) != 0) {
        return "timeout:pll_off";
    }
    SNAPUQ_REG(RCC_PLLCFGR) = (SNAPUQ_REG(RCC_PLLCFGR) & 0xF0000000u) | PLL_M | (PLL_N << 6) | (0u << 16) |
                              (0u << 22) | (PLL_Q << 24);
    SNAPUQ_REG(RCC_CR) |= (1u << 24); /* PLLON */
    if (wait_bits(RCC_CR, 1u << 25, 1u << 25) != 0) {
        return "timeout:pll_lock";
    }
#if OVERDRIVE
    SNAPUQ_REG(PWR_CR) |= (1u << 16); /* ODEN */
    if (wait_bits(PWR_CSR, 1u << 16, 1u << 16) != 0) {
        return "timeout:overdrive";
    }
    SNAPUQ_REG(PWR_CR) |= (1u << 17); /* ODSWEN */
    if (wait_bits(PWR_CSR, 1u << 17, 1u << 17) != 0) {
        return "timeout:overdrive_switch";
    }
#endif
    /* AHB /1, APB1 and APB2 within their maxima, then SYSCLK = PLL */
    SNAPUQ_REG(RCC_CFGR) = (SNAPUQ_REG(RCC_CFGR) & ~0xFCF3u) | (ppre_bits(PPRE1_DIV) << 10) |
                           (ppre_bits(PPRE2_DIV) << 13) | 2u;
    if (wait_bits(RCC_CFGR, 3u << 2, 2u << 2) != 0) {
        return "timeout:sysclk_switch";
    }
    usart_hz = TARGET_HZ / (USART_ON_APB2 ? PPRE2_DIV : PPRE1_DIV);
    return 0;
}

static void clock_back(void)
{
    SNAPUQ_REG(RCC_CFGR) &= ~0xFCF3u; /* SYSCLK = HSI, no prescalers */
    (void)wait_bits(RCC_CFGR, 3u << 2, 0u);
    SNAPUQ_REG(RCC_CR) &= ~(1u << 24);
#if OVERDRIVE
    SNAPUQ_REG(PWR_CR) &= ~((1u << 16) | (1u << 17));
#endif
    SNAPUQ_REG(FLASH_ACR) &= ~0xFu;
    usart_hz = RESET_HZ;
}
#endif

#if defined(FAM_F7)
static void caches_on(void)
{
    uint32_t ccsidr, sets, ways, w;
    /* I-cache: invalidate, enable */
    SNAPUQ_BARRIER();
    SNAPUQ_REG(SCB_ICIALLU) = 0u;
    SNAPUQ_BARRIER();
    SNAPUQ_REG(SCB_CCR) |= (1u << 17);
    SNAPUQ_BARRIER();
    /* D-cache: invalidate every set/way of level 1, enable */
    SNAPUQ_REG(SCB_CSSELR) = 0u;
    SNAPUQ_BARRIER();
    ccsidr = SNAPUQ_REG(SCB_CCSIDR);
    sets = (ccsidr >> 13) & 0x7FFFu;
    do {
        ways = (ccsidr >> 3) & 0x3FFu;
        w = ways;
        do {
            SNAPUQ_REG(SCB_DCISW) = ((sets & 0x1FFu) << 5) | ((w & 3u) << 30);
        } while (w-- != 0u);
    } while (sets-- != 0u);
    SNAPUQ_BARRIER();
    SNAPUQ_REG(SCB_CCR) |= (1u << 16);
    SNAPUQ_BARRIER();
}
#endif

static void clock_init(void)
{
    const char *fail;
    if (SNAPUQ_REG(RCC_CR) == 0u) {
        /* no RCC model: an emulator (silicon resets with the reset oscillator ON and READY) */
        emulated = 1;
#ifdef SNAPUQ_QEMU_SYSCLK_HZ
        cpu_hz = SNAPUQ_QEMU_SYSCLK_HZ;
        usart_hz = SNAPUQ_QEMU_SYSCLK_HZ;
#endif
        clock_desc = "emulator_no_rcc";
        return;
    }
    fail = clock_up();
    if (fail == 0) {
        cpu_hz = TARGET_HZ;
        clock_desc = PLL_NAME;
    } else {
        clock_back();
        cpu_hz = RESET_HZ;
        clock_desc = fail; /* reported as RESET_NAME "(" fail ")" */
        clock_failed = 1;
    }
#if defined(FAM_F7)
    caches_on();
#endif
}

const char *snapuq_port_clock(void)
{
    /* a timeout keeps the reset clock: "reset_hsi_16mhz(timeout:pll_lock)" */
    static char buf[64];
    const char *a = RESET_NAME, *b = clock_desc;
    size_t i = 0u;
    if (!clock_failed) {
        return clock_desc;
    }
    while (*a != '\0' && i < sizeof buf - 3u) {
        buf[i++] = *a++;
    }
    buf[i++] = '(';
    while (*b != '\0' && i < sizeof buf - 2u) {
        buf[i++] = *b++;
    }
    buf[i++] = ')';
    buf[i] = '\0';
    return buf;
}

/* ------------------------------------------------------------------ pins */
static void gpio_af(uint32_t base, uint32_t pin, uint32_t af)
{
    SNAPUQ_REG(base + 0x00u) = (SNAPUQ_REG(base + 0x00u) & ~(3u << (2u * pin))) | (2u << (2u * pin));
    if (pin < 8u) {
        SNAPUQ_REG(base + 0x20u) = (SNAPUQ_REG(base + 0x20u) & ~(0xFu << (4u * pin))) | (af << (4u * pin));
    } else {
        SNAPUQ_REG(base + 0x24u) =
            (SNAPUQ_REG(base + 0x24u) & ~(0xFu << (4u * (pin - 8u)))) | (af << (4u * (pin - 8u)));
    }
}

static void gpio_out(uint32_t base, uint32_t pin)
{
    SNAPUQ_REG(base + 0x00u) = (SNAPUQ_REG(base + 0x00u) & ~(3u << (2u * pin))) | (1u << (2u * pin));
}

#if defined(SNAPUQ_STM32F767)
#define TS_GPIO GPIOB
#define TS_PIN 0u
static void pins_init(void)
{
    SNAPUQ_REG(RCC_AHB1ENR) |= (1u << 1) | (1u << 3); /* GPIOB, GPIOD */
    SNAPUQ_REG(RCC_APB1ENR) |= (1u << 18);            /* USART3 */
    (void)SNAPUQ_REG(RCC_APB1ENR);
    gpio_af(GPIOD, 8u, 7u); /* PD8 TX AF7 */
    gpio_af(GPIOD, 9u, 7u); /* PD9 RX AF7 */
    gpio_out(TS_GPIO, TS_PIN);
}
#elif defined(SNAPUQ_STM32L432)
#define TS_GPIO GPIOB
#define TS_PIN 3u
static void pins_init(void)
{
    SNAPUQ_REG(RCC_AHB2ENR) |= (1u << 0) | (1u << 1); /* GPIOA, GPIOB */
    SNAPUQ_REG(RCC_APB1ENR1) |= (1u << 17);           /* USART2 */
    (void)SNAPUQ_REG(RCC_APB1ENR1);
    gpio_af(GPIOA, 2u, 7u);  /* PA2 TX AF7 */
    gpio_af(GPIOA, 15u, 3u); /* PA15 RX AF3 */
    gpio_out(TS_GPIO, TS_PIN);
}
#elif defined(SNAPUQ_STM32F446)
#define TS_GPIO GPIOA
#define TS_PIN 5u
static void pins_init(void)
{
    SNAPUQ_REG(RCC_AHB1ENR) |= (1u << 0); /* GPIOA */
    SNAPUQ_REG(RCC_APB1ENR) |= (1u << 17); /* USART2 */
    (void)SNAPUQ_REG(RCC_APB1ENR);
    gpio_af(GPIOA, 2u, 7u); /* PA2 TX AF7 */
    gpio_af(GPIOA, 3u, 7u); /* PA3 RX AF7 */
    gpio_out(TS_GPIO, TS_PIN);
}
#else /* F405 */
#define TS_GPIO GPIOB
#define TS_PIN 0u
static void pins_init(void)
{
    SNAPUQ_REG(RCC_AHB1ENR) |= (1u << 0) | (1u << 1); /* GPIOA, GPIOB */
    SNAPUQ_REG(RCC_APB2ENR) |= (1u << 4);             /* USART1 */
    (void)SNAPUQ_REG(RCC_APB2ENR);
    gpio_af(GPIOA, 9u, 7u);  /* PA9 TX AF7 */
    gpio_af(GPIOA, 10u, 7u); /* PA10 RX AF7 */
    gpio_out(TS_GPIO, TS_PIN);
}
#endif

/* ------------------------------------------------------------------ counter */
static void counter_init(void)
{
    uint32_t a, b, i;
    SNAPUQ_REG(SCB_DEMCR) |= (1u << 24); /* TRCENA */
#if defined(FAM_F7)
    SNAPUQ_REG(DWT_LAR) = 0xC5ACCE55u; /* the M7's DWT is locked at reset */
#endif
    SNAPUQ_REG(DWT_CYCCNT) = 0u;
    SNAPUQ_REG(DWT_CTRL) |= 1u;
    a = SNAPUQ_REG(DWT_CYCCNT);
    for (i = 0u; i < 64u; i++) {
        __asm volatile("nop");
    }
    b = SNAPUQ_REG(DWT_CYCCNT);
    have_dwt = (b != a);
    if (!have_dwt) {
        snapuq_cortexm_systick_start(); /* SysTick on the core clock, 24 bits + wrap interrupt */
    }
}

void snapuq_port_init(void)
{
    clock_init();
    pins_init();
    SNAPUQ_REG(USART_CR1) = 0u;
    SNAPUQ_REG(USART_BRR) = (usart_hz + BAUD / 2u) / BAUD;
    SNAPUQ_REG(USART_CR1) = CR1_ENABLE;
    counter_init();
}

const char *snapuq_port_board(void) { return BOARD; }
const char *snapuq_port_cpu(void) { return CPU; }
uint32_t snapuq_port_cpu_hz(void) { return cpu_hz; }

void snapuq_port_write(const char *buf, size_t len)
{
    size_t i;
    for (i = 0; i < len; i++) {
        (void)wait_bits(USART_ISR, ISR_TXE, ISR_TXE);
        SNAPUQ_REG(USART_TDR) = (uint8_t)buf[i];
    }
}

/* DWT: 64-bit extension of the 32-bit CYCCNT (wraps every 2^32 cycles, ~20 s at 216 MHz; the main
 * loop polls at least every 20 ms). SysTick: 24-bit counter + wrap interrupt (cortexm.c). */
uint64_t snapuq_port_counter(void)
{
    uint32_t c;
    if (!have_dwt) {
        return snapuq_cortexm_systick_count();
    }
    c = SNAPUQ_REG(DWT_CYCCNT);
    if (c < last_cyc) {
        wraps++;
    }
    last_cyc = c;
    return ((uint64_t)wraps << 32) | c;
}

uint32_t snapuq_port_counter_hz(void) { return cpu_hz; }

const char *snapuq_port_counter_kind(void)
{
    if (have_dwt) {
        return "dwt_cycles";
    }
#ifdef SNAPUQ_QEMU_SYSCLK_HZ
    if (emulated) {
        return "qemu_systick_" STR(SNAPUQ_QEMU_SYSCLK_MHZ) "mhz";
    }
#endif
    return "systick_cycles";
}

uint32_t snapuq_port_millis(void) { return (uint32_t)(snapuq_port_counter() / (cpu_hz / 1000u)); }

int snapuq_port_getc(uint32_t timeout_ms)
{
    uint64_t start = snapuq_port_counter();
    uint64_t span = (uint64_t)timeout_ms * (cpu_hz / 1000u);
    for (;;) {
        uint32_t isr = SNAPUQ_REG(USART_ISR);
        if (isr & ISR_RXNE) {
            return (int)(SNAPUQ_REG(USART_RDR) & 0xFFu);
        }
        if (isr & ISR_ORE) {
#if defined(USART_V2)
            SNAPUQ_REG(USART_ICR) = ISR_ORE;
#else
            (void)SNAPUQ_REG(USART_RDR); /* v1: SR then DR read clears ORE */
#endif
        }
        if (snapuq_port_counter() - start >= span) {
            return -1;
        }
    }
}

void snapuq_port_timestamp(int level)
{
    SNAPUQ_REG(TS_GPIO + 0x18u) = level ? (1u << TS_PIN) : (1u << (TS_PIN + 16u)); /* BSRR */
}

size_t snapuq_port_stack_peak(void) { return snapuq_cortexm_stack_peak(); }
size_t snapuq_port_stack_size(void) { return snapuq_cortexm_stack_size(); }
size_t snapuq_port_flash_used(void) { return snapuq_cortexm_flash_used(); }
size_t snapuq_port_flash_size(void) { return snapuq_cortexm_flash_size(); }
size_t snapuq_port_ram_static(void) { return snapuq_cortexm_ram_static(); }
size_t snapuq_port_ram_size(void) { return snapuq_cortexm_ram_size(); }
uint8_t *snapuq_port_pool(size_t *bytes) { return snapuq_cortexm_pool(bytes); }
void snapuq_port_reset(void) { snapuq_cortexm_reset(); }
void snapuq_port_exit(int code)
{
    if (emulated) {
        snapuq_cortexm_exit(code); /* semihosting: only under an emulator or a debugger */
    }
    snapuq_cortexm_reset();
}

void snapuq_cortexm_fault(uint32_t kind)
{
    static const char msg[] = "\r\ne-fault-";
    char k = (char)('0' + (char)(kind % 10u));
    snapuq_port_write(msg, sizeof msg - 1u);
    snapuq_port_write(&k, 1u);
    snapuq_port_write("\r\n", 2u);
    snapuq_cortexm_reset();
}
