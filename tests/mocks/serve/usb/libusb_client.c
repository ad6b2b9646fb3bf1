/* A libusb-1.0 client that knows nothing of tinyhil: it finds the bridge by VID:PID and talks to it as to a board.
 *
 *   libusb_client VID PID basic    arm one SRAM sector, bulk-write it, read 4 bytes back through XDATA (control
 *                                  read), then read the sector back with an asynchronous bulk IN (the test arms
 *                                  and releases that read beforehand, standing in for the GPU's completion)
 *   libusb_client VID PID errors   a control read, an arm, a bulk write and a control read, printing libusb's error
 *                                  names (the test's fault plan decides which fail)
 *   libusb_client VID PID babble   a control read, an asynchronous bulk IN of one sector (armed and released by the
 *                                  test) and a control read again, printing what libusb reports (the test's fault
 *                                  plan makes the device babble on some of them)
 *
 * Each result is one line, "name key=value ...", for the test to compare with the emulator's state.
 */
#include <libusb-1.0/libusb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VENDOR_OUT 0x40
#define VENDOR_IN 0xC0
#define REQ_XDATA_READ 0xE4
#define REQ_SRAM_ARM 0xF2
#define SRAM_WINDOW 0x8000
#define EP_OUT 0x02
#define EP_IN 0x81
#define SECTOR 512
#define TIMEOUT_MS 1000
#define SHORT_TIMEOUT_MS 200

static void print_hex(const char *name, const unsigned char *data, int n)
{
    printf("%s=", name);
    for (int i = 0; i < n; i++)
        printf("%02x", data[i]);
}

static void done(struct libusb_transfer *transfer)
{
    *(int *)transfer->user_data = 1;
}

static int basic(libusb_device_handle *handle)
{
    unsigned char sector[SECTOR], back[SECTOR], xdata[4];
    int transferred = 0, completed = 0, rc;

    for (int i = 0; i < SECTOR; i++)
        sector[i] = (unsigned char)(i * 7 + 3);
    rc = libusb_control_transfer(handle, VENDOR_OUT, REQ_SRAM_ARM, 1, 0, NULL, 0, TIMEOUT_MS);
    printf("arm_out rc=%d\n", rc);
    rc = libusb_bulk_transfer(handle, EP_OUT, sector, SECTOR, &transferred, TIMEOUT_MS);
    printf("bulk_write rc=%d transferred=%d ", rc, transferred);
    print_hex("data", sector, SECTOR);
    printf("\n");
    rc = libusb_control_transfer(handle, VENDOR_IN, REQ_XDATA_READ, SRAM_WINDOW, 0, xdata, sizeof xdata, TIMEOUT_MS);
    printf("control_read rc=%d ", rc);
    print_hex("data", xdata, rc > 0 ? rc : 0);
    printf("\n");

    struct libusb_transfer *transfer = libusb_alloc_transfer(0);
    memset(back, 0, sizeof back);
    libusb_fill_bulk_transfer(transfer, handle, EP_IN, back, SECTOR, done, &completed, TIMEOUT_MS);
    rc = libusb_submit_transfer(transfer);
    while (rc == 0 && !completed)
        rc = libusb_handle_events_completed(NULL, &completed);
    printf("async_read rc=%d status=%d actual=%d ", rc, transfer->status, transfer->actual_length);
    print_hex("data", back, transfer->actual_length);
    printf("\n");
    libusb_free_transfer(transfer);
    return 0;
}

static int errors(libusb_device_handle *handle)
{
    unsigned char xdata[4], sector[SECTOR] = {0};
    int transferred = 0, rc;

    rc = libusb_control_transfer(handle, VENDOR_IN, REQ_XDATA_READ, SRAM_WINDOW, 0, xdata, sizeof xdata, TIMEOUT_MS);
    printf("control_read rc=%s\n", rc < 0 ? libusb_error_name(rc) : "ok");
    rc = libusb_control_transfer(handle, VENDOR_OUT, REQ_SRAM_ARM, 1, 0, NULL, 0, TIMEOUT_MS);
    printf("arm_out rc=%s\n", rc < 0 ? libusb_error_name(rc) : "ok");
    rc = libusb_bulk_transfer(handle, EP_OUT, sector, SECTOR, &transferred, SHORT_TIMEOUT_MS);
    printf("bulk_write rc=%s transferred=%d\n", rc < 0 ? libusb_error_name(rc) : "ok", transferred);
    rc = libusb_control_transfer(handle, VENDOR_IN, REQ_XDATA_READ, SRAM_WINDOW, 0, xdata, sizeof xdata, TIMEOUT_MS);
    printf("control_read rc=%s\n", rc < 0 ? libusb_error_name(rc) : "ok");
    return 0;
}

static int babble(libusb_device_handle *handle)
{
    unsigned char xdata[4], back[SECTOR];
    int completed = 0, rc;

    rc = libusb_control_transfer(handle, VENDOR_IN, REQ_XDATA_READ, SRAM_WINDOW, 0, xdata, sizeof xdata, TIMEOUT_MS);
    printf("control_read rc=%s\n", rc < 0 ? libusb_error_name(rc) : "ok");

    struct libusb_transfer *transfer = libusb_alloc_transfer(0);
    memset(back, 0, sizeof back);
    libusb_fill_bulk_transfer(transfer, handle, EP_IN, back, SECTOR, done, &completed, TIMEOUT_MS);
    rc = libusb_submit_transfer(transfer);
    while (rc == 0 && !completed)
        rc = libusb_handle_events_completed(NULL, &completed);
    printf("async_read rc=%d status=%d actual=%d ", rc, transfer->status, transfer->actual_length);
    print_hex("data", back, transfer->actual_length);
    printf("\n");
    libusb_free_transfer(transfer);

    rc = libusb_control_transfer(handle, VENDOR_IN, REQ_XDATA_READ, SRAM_WINDOW, 0, xdata, sizeof xdata, TIMEOUT_MS);
    printf("control_read_again rc=%s ", rc < 0 ? libusb_error_name(rc) : "ok");
    print_hex("data", xdata, rc > 0 ? rc : 0);
    printf("\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s VID PID basic|errors|babble\n", argv[0]);
        return 2;
    }
    int vid = (int)strtol(argv[1], NULL, 16), pid = (int)strtol(argv[2], NULL, 16);
    if (libusb_init(NULL) != 0)
        return 3;
    libusb_device_handle *handle = libusb_open_device_with_vid_pid(NULL, vid, pid);
    if (handle == NULL) {
        fprintf(stderr, "no device %04x:%04x\n", vid, pid);
        return 4;
    }
    int rc = libusb_claim_interface(handle, 0);
    printf("claim rc=%d\n", rc);
    if (strcmp(argv[3], "errors") == 0)
        rc = errors(handle);
    else if (strcmp(argv[3], "babble") == 0)
        rc = babble(handle);
    else
        rc = basic(handle);
    libusb_release_interface(handle, 0);
    libusb_close(handle);
    libusb_exit(NULL);
    return rc;
}
