/*
 * STM32 port, register level (no vendor HAL, builds with Debian's arm-none-eabi-gcc):
 *   SNAPUQ_STM32F767: Nucleo-F767ZI ("Big-MCU"), USART3 on PD8/PD9 (ST-LINK VCP), LED1 PB0 as the
 *                     timestamp pin, HSI 16 MHz core clock.
 *   SNAPUQ_STM32L432: Nucleo-L432KC ("Small-MCU"), USART2 on PA2/PA15 (ST-LINK VCP), PB3 (LD3) as
 *                     the timestamp pin, MSI 4 MHz core clock at reset raised to MSI 48 MHz.
 * The counter is the DWT cycle counter (cycles at the core clock). 115200 baud, 8N1.
 * Compiled here; not run on hardware in this repository's CI.
 */
#include "../cortexm/cortexm.h"
#include "../snapuq_port.h"

#define RCC_BASE_F7 0x40023800u
#define RCC_BASE_L4 0x40021000u

#if defined(SNAPUQ_STM32F767)
#define BOARD "nucleo_f767zi"
#define CPU "cortex-m7"
#define CORE_HZ 16000000u
#define USART 0x40004800u /* USART3 */
#define USART_CLK_HZ 16000000u
#elif defined(SNAPUQ_STM32L432)
#define BOARD "nucleo_l432kc"
#define CPU "cortex-m4"
#define CORE_HZ 48000000u
#define USART 0x40004400u /* USART2 */
#define USART_CLK_HZ 48000000u
#else
#error "define SNAPUQ_STM32F767 or SNAPUQ_STM32L432"
#endif

/* USART v2 registers (F7 and L4 share the layout) */
#define USART_CR1 (USART + 0x00u)
#define USART_BRR (USART + 0x0Cu)
#define USART_ISR (USART + 0x1Cu)
#define USART_ICR (USART + 0x20u)
#define USART_RDR (USART + 0x24u)
#define USART_TDR (USART + 0x28u)
#define ISR_RXNE (1u << 5)
#define ISR_TXE (1u << 7)
#define ISR_ORE (1u << 3)

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
#define TS_GPIO 0x40020400u /* GPIOB */
#define TS_PIN 0u
static void board_init(void)
{
    SNAPUQ_REG(RCC_BASE_F7 + 0x30u) |= (1u << 1) | (1u << 3); /* AHB1ENR: GPIOB, GPIOD */
    SNAPUQ_REG(RCC_BASE_F7 + 0x40u) |= (1u << 18);            /* APB1ENR: USART3 */
    (void)SNAPUQ_REG(RCC_BASE_F7 + 0x40u);
    gpio_af(0x40020C00u, 8u, 7u); /* PD8 TX AF7 */
    gpio_af(0x40020C00u, 9u, 7u); /* PD9 RX AF7 */
    gpio_out(TS_GPIO, TS_PIN);
}
#else
#define TS_GPIO 0x48000400u /* GPIOB */
#define TS_PIN 3u
static void board_init(void)
{
    /* flash: 2 wait states for 48 MHz (range 1), then MSI range 11 (48 MHz) */
    SNAPUQ_REG(0x40022000u) = (SNAPUQ_REG(0x40022000u) & ~7u) | 2u;
    while ((SNAPUQ_REG(0x40022000u) & 7u) != 2u) {
    }
    SNAPUQ_REG(RCC_BASE_L4 + 0x00u) = (SNAPUQ_REG(RCC_BASE_L4 + 0x00u) & ~(0xFu << 4)) | (11u << 4) | (1u << 3);
    while (!(SNAPUQ_REG(RCC_BASE_L4 + 0x00u) & 2u)) { /* MSIRDY */
    }
    SNAPUQ_REG(RCC_BASE_L4 + 0x4Cu) |= (1u << 0) | (1u << 1); /* AHB2ENR: GPIOA, GPIOB */
    SNAPUQ_REG(RCC_BASE_L4 + 0x58u) |= (1u << 17);            /* APB1ENR1: USART2 */
    (void)SNAPUQ_REG(RCC_BASE_L4 + 0x58u);
    gpio_af(0x48000000u, 2u, 7u);  /* PA2 TX AF7 */
    gpio_af(0x48000000u, 15u, 3u); /* PA15 RX AF3 */
    gpio_out(TS_GPIO, TS_PIN);
}
#endif

void snapuq_port_init(void)
{
    board_init();
    SNAPUQ_REG(USART_CR1) = 0u;
    SNAPUQ_REG(USART_BRR) = (USART_CLK_HZ + 57600u) / 115200u;
    SNAPUQ_REG(USART_CR1) = (1u << 0) | (1u << 2) | (1u << 3); /* UE, RE, TE */
    /* DWT cycle counter */
    SNAPUQ_REG(SCB_DEMCR) |= (1u << 24); /* TRCENA */
#if defined(SNAPUQ_STM32F767)
    SNAPUQ_REG(DWT_LAR) = 0xC5ACCE55u; /* Cortex-M7 needs the lock access unlocked */
#endif
    SNAPUQ_REG(DWT_CYCCNT) = 0u;
    SNAPUQ_REG(DWT_CTRL) |= 1u;
}

const char *snapuq_port_board(void) { return BOARD; }
const char *snapuq_port_cpu(void) { return CPU; }
uint32_t snapuq_port_cpu_hz(void) { return CORE_HZ; }

void snapuq_port_write(const char *buf, size_t len)
{
    size_t i;
    for (i = 0; i < len; i++) {
        while (!(SNAPUQ_REG(USART_ISR) & ISR_TXE)) {
        }
        SNAPUQ_REG(USART_TDR) = (uint8_t)buf[i];
    }
}

/* 64-bit extension of the 32-bit CYCCNT (wraps every 2^32 cycles; read at least that often:
 * the main loop polls every 20 ms) */
static uint32_t last_cyc, wraps;

uint64_t snapuq_port_counter(void)
{
    uint32_t c = SNAPUQ_REG(DWT_CYCCNT);
    if (c < last_cyc) {
        wraps++;
    }
    last_cyc = c;
    return ((uint64_t)wraps << 32) | c;
}

uint32_t snapuq_port_counter_hz(void) { return CORE_HZ; }
const char *snapuq_port_counter_kind(void) { return "dwt_cycles"; }
uint32_t snapuq_port_millis(void) { return (uint32_t)(snapuq_port_counter() / (CORE_HZ / 1000u)); }

int snapuq_port_getc(uint32_t timeout_ms)
{
    uint64_t start = snapuq_port_counter();
    uint64_t span = (uint64_t)timeout_ms * (CORE_HZ / 1000u);
    for (;;) {
        uint32_t isr = SNAPUQ_REG(USART_ISR);
        if (isr & ISR_ORE) {
            SNAPUQ_REG(USART_ICR) = ISR_ORE;
        }
        if (isr & ISR_RXNE) {
            return (int)(SNAPUQ_REG(USART_RDR) & 0xFFu);
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
    (void)code;
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
